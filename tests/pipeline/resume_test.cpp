// A pipeline stopped at any batch and resumed from its position() delivers what one never stopped
// delivers: records, augmentations, passes and batch numbers, for every source kind here, any
// producer, thread and consumer count, mid-pass and across passes. LMDB and image sources: their
// own tests (tests/io/lmdb_source_test.cpp, tests/io/image_sources_test.cpp).
#include <crema/core/generator.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include "common/resume_check.hpp"
#include "common/watchdog.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using crema::partial_batch;
using crema::pipeline_mode;
using crema::pipeline_options;

std::vector<int> numbers(int count) {
  std::vector<int> values(static_cast<std::size_t>(count));
  std::iota(values.begin(), values.end(), 0);
  return values;
}

const auto hash_int = [](int record) { return static_cast<std::uint64_t>(record) * 1000003U; };

// Stops drawn at random (seeded, so a failure repeats) below `pulls`, with the first and last.
std::vector<std::size_t> random_stops(std::size_t pulls, std::size_t count, unsigned seed) {
  std::mt19937 draw(seed);
  std::vector<std::size_t> stops{0, pulls - 1};
  std::uniform_int_distribution<std::size_t> below(1, pulls - 2);
  for (std::size_t i = 0; i < count; ++i) stops.push_back(below(draw));
  return stops;
}

// A shuffled vector source of 23 records: every pass another order.
auto shuffled_vector() {
  return [] { return crema::vector_source<int>(numbers(23)).shuffle(11); };
}

// A vector source that runs `at_end` the first time it finds its pass over, before it says so:
// lets a test hold the end of the pass until the pipeline is where it wants it.
class end_hook_source : public crema::vector_source<int> {
 public:
  end_hook_source(std::vector<int> records, std::function<void()> at_end)
      : crema::vector_source<int>(std::move(records)), at_end_(std::move(at_end)) {}

  const int* next() {
    const int* record = crema::vector_source<int>::next();
    if (record == nullptr && at_end_) std::exchange(at_end_, {})();
    return record;
  }

 private:
  std::function<void()> at_end_;
};

}  // namespace

TEST_SUITE("pipeline resume") {
  TEST_CASE(
      "a resumed pipeline delivers the batches of one never stopped, augmentations included") {
    crema::test::watchdog guard(std::chrono::seconds(120), "pipeline resume grid");
    for (const std::size_t producers : {1U, 3U}) {
      for (const std::size_t threads : {1U, 2U}) {
        for (const std::size_t consumers : {1U, 2U, 3U}) {
          CAPTURE(producers);
          CAPTURE(threads);
          CAPTURE(consumers);
          const pipeline_options options{.batch_size = 5,
                                         .prefetch = 3,
                                         .producers = producers,
                                         .threads = threads,
                                         .consumers = consumers,
                                         .seed = 5};
          // 30 batches of 5 over 23 records: six and a half passes, batches across passes.
          crema::test::check_resumes_exactly(shuffled_vector(), hash_int, options, 30,
                                             random_stops(30, 6, 17U + producers + consumers));
        }
      }
    }
  }

  TEST_CASE("a resumed single pass ends where the whole one does, for every last batch") {
    crema::test::watchdog guard(std::chrono::seconds(60), "pipeline resume single pass");
    for (const partial_batch last :
         {partial_batch::keep, partial_batch::drop, partial_batch::pad}) {
      for (const std::size_t consumers : {1U, 2U}) {
        CAPTURE(static_cast<int>(last));
        CAPTURE(consumers);
        const pipeline_options options{.batch_size = 4,
                                       .prefetch = 2,
                                       .producers = 2,
                                       .threads = 2,
                                       .consumers = consumers,
                                       .mode = pipeline_mode::single_pass,
                                       .last_batch = last,
                                       .seed = 9};
        // 23 records: 5 full batches and one of 3.
        crema::test::check_resumes_exactly(shuffled_vector(), hash_int, options, 10,
                                           {0, 1, 2, 3, 4, 5});
      }
    }
  }

  TEST_CASE("a batch not yet pulled keeps its resume point while the pass ends behind it") {
    crema::test::watchdog guard(std::chrono::seconds(30), "pipeline resume at the end");
    // 18 records in batches of 4: batches 0 to 3, then records 16 and 17, dropped. The consumer
    // takes three; batch 3 waits for it in one slot while the dropped batch is claimed in the
    // other, and the end of the pass is held until the second producer waits for that slot.
    // Handed the slot, it claims a batch 5 that finds the pass over and gives the slot back.
    std::function<std::size_t()> producers_waiting;
    std::atomic<bool> other_producer_waited{false};
    std::atomic<bool> end_held{false};
    const auto hold_the_end = [&] {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (producers_waiting() == 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::yield();
      }
      other_producer_waited.store(producers_waiting() != 0);
      end_held.store(true);
    };
    crema::double_buffered_pipeline pipe{end_hook_source(numbers(18), hold_the_end),
                                         [](int record) { return record; },
                                         {.batch_size = 4,
                                          .prefetch = 2,
                                          .producers = 2,
                                          .threads = 2,
                                          .consumers = 1,
                                          .mode = pipeline_mode::single_pass,
                                          .last_batch = partial_batch::drop,
                                          .ordered = true}};
    producers_waiting = [&pipe] { return pipe.stats().waiting_producers; };
    auto consumer = pipe.consumer(0);
    for (int batch = 0; batch < 3; ++batch) {
      const auto lease = consumer.pull();
      REQUIRE(lease);
    }
    // Both producers are done once the end was held and the empty claim gave its slot back (the
    // dropped batch's went to it: none is free between).
    while (!end_held.load() || pipe.stats().free_slots != 1) std::this_thread::yield();
    CHECK(other_producer_waited.load());
    CHECK(pipe.stats().queued_batches == 1);  // batch 3; the end of the pass behind it is none
    CHECK(pipe.position() == crema::pipeline_position{3, 0, 12});
    const auto last = consumer.pull();
    REQUIRE(last);
    CHECK((*last)[0] == 12);
    CHECK_FALSE(consumer.pull());
  }

  TEST_CASE("indexed and generator sources resume exactly, sharded and shuffled") {
    crema::test::watchdog guard(std::chrono::seconds(60), "pipeline resume sources");
    const pipeline_options options{
        .batch_size = 3, .prefetch = 2, .producers = 2, .threads = 2, .consumers = 2, .seed = 1};
    SUBCASE("indexed, rank 1 of 3") {
      const auto make = [] {
        crema::indexed_source<int> source(
            40, [](std::size_t i) { return static_cast<int>(i * 7); }, "sevens");
        source.shard(1, 3);
        source.shuffle(3);
        return source;
      };
      crema::test::check_resumes_exactly(make, hash_int, options, 20, random_stops(20, 6, 3));
    }
    SUBCASE("generator, unshuffled: every pass the same order") {
      const auto make = [] {
        return crema::generator_source<int>([]() -> crema::generator<int> {
          for (int i = 0; i < 17; ++i) co_yield i* i;
        });
      };
      crema::test::check_resumes_exactly(make, hash_int, options, 20, random_stops(20, 6, 4));
    }
  }

  TEST_CASE("position() counts what consumers were given, not what the producers read ahead") {
    crema::test::watchdog guard(std::chrono::seconds(30), "pipeline position");
    crema::double_buffered_pipeline pipe{
        crema::vector_source<int>(numbers(10)),
        [](int record) { return record; },
        {.batch_size = 3, .prefetch = 4, .producers = 2, .threads = 2, .ordered = true}};
    CHECK(pipe.position() == crema::pipeline_position{0, 0, 0});
    auto consumer = pipe.consumer(0);
    { auto first = consumer.pull(); }
    { auto second = consumer.pull(); }
    // Let the producers fill every slot: they have read well past the consumer.
    while (pipe.stats().free_slots != 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    CHECK(pipe.stats().records_produced >= 12);
    CHECK(pipe.position() == crema::pipeline_position{2, 0, 6});
    { auto third = consumer.pull(); }
    { auto fourth = consumer.pull(); }  // records 9, 0, 1: the pass wraps inside it
    const crema::pipeline_position after_wrap = pipe.position();
    CHECK(after_wrap == crema::pipeline_position{4, 1, 2});
  }

  TEST_CASE("resuming is refused where it cannot be exact, with the reason") {
    crema::double_buffered_pipeline unordered{crema::vector_source<int>(numbers(10)),
                                              [](int record) { return record; },
                                              {.batch_size = 2}};
    CHECK_THROWS_WITH_AS(
        static_cast<void>(unordered.position()),
        doctest::Contains("position() needs an ordered pipeline with a reader of its own"),
        crema::config_error);

    crema::source_registry registry;
    CHECK_THROWS_WITH_AS(
        crema::double_buffered_pipeline(
            crema::vector_source<int>(numbers(10)), [](int record) { return record; },
            {.batch_size = 2, .registry = &registry, .resume_from = crema::pipeline_position{}}),
        doctest::Contains("not one shared through a registry"), crema::config_error);

    CHECK_THROWS_WITH_AS(
        crema::double_buffered_pipeline(
            crema::vector_source<int>(numbers(10), "ten"), [](int record) { return record; },
            {.batch_size = 2, .resume_from = crema::pipeline_position{3, 0, 11}}),
        doctest::Contains("vector:ten"), crema::config_error);

    CHECK_THROWS_WITH_AS(
        crema::double_buffered_pipeline(
            crema::vector_source<int>(numbers(10)), [](int record) { return record; },
            {.batch_size = 2, .resume_from = crema::pipeline_position{~std::uint64_t{0}, 0, 0}}),
        doctest::Contains("past the batches a pipeline numbers"), crema::config_error);
  }
}
