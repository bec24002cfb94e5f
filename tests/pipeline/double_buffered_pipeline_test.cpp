#include <crema/pipeline/double_buffered_pipeline.hpp>

#include "common/counted.hpp"
#include "common/gate.hpp"
#include "common/watchdog.hpp"
#include "pipeline/delivery.hpp"
#include "pipeline/numbers.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using crema::pipeline_mode;
using crema::test::watchdog;

using crema::test::first_numbers;
using crema::test::identity;
using crema::test::numbers;

// Numbers whose records a producer prefetches: it counts the hints.
struct prefetched_numbers : crema::vector_source<int> {
  using crema::vector_source<int>::vector_source;
  static inline std::atomic<int> hints{0};
  static void prefetch(const int& record) noexcept {
    ++hints;
    hinted_[static_cast<std::size_t>(record)].store(true);
  }
  static bool hinted(int record) { return hinted_[static_cast<std::size_t>(record)].load(); }

 private:
  static inline std::vector<std::atomic<bool>> hinted_ = std::vector<std::atomic<bool>>(1000);
};
static_assert(crema::prefetching_record_source<prefetched_numbers>);
static_assert(!crema::prefetching_record_source<crema::vector_source<int>>);

}  // namespace

TEST_SUITE("double_buffered_pipeline") {
  TEST_CASE("the usage in the README: one consumer reads every record once") {
    watchdog guard(30s, "README usage");
    crema::double_buffered_pipeline pipe{numbers(1000),
                                         identity,
                                         {.batch_size = 64,
                                          .prefetch = 4,
                                          .producers = 4,
                                          .threads = 2,
                                          .mode = pipeline_mode::single_pass}};
    std::vector<int> seen;
    for (auto batch : pipe.consumer(0)) {
      for (int value : *batch) seen.push_back(value);
    }
    std::sort(seen.begin(), seen.end());
    CHECK(seen == first_numbers(1000));
    const auto stats = pipe.stats();
    CHECK(stats.batches_produced == 16);
    CHECK(stats.records_produced == 1000);
    CHECK(stats.batches_consumed == 16);
  }

  TEST_CASE("producers prefetch every record of a source that can, before they transform it") {
    watchdog guard(30s, "prefetch");
    std::atomic<int> unhinted{0};
    crema::double_buffered_pipeline pipe{
        prefetched_numbers(first_numbers(1000), "prefetched"),
        [&](const int& record) {
          if (!prefetched_numbers::hinted(record)) ++unhinted;
          return record;
        },
        {.batch_size = 64, .producers = 3, .threads = 2, .mode = pipeline_mode::single_pass}};
    std::vector<int> seen;
    for (auto batch : pipe.consumer(0)) {
      for (int value : *batch) seen.push_back(value);
    }
    std::sort(seen.begin(), seen.end());
    CHECK(seen == first_numbers(1000));
    CHECK(prefetched_numbers::hints.load() == 1000);  // each record once, none twice
    CHECK(unhinted.load() == 0);
  }

  TEST_CASE("eight producers share two threads: each is suspended and only two threads run them") {
    watchdog guard(60s, "suspension property");
    std::mutex mutex;
    std::set<std::thread::id> producer_threads;
    const auto note_thread = [&](const int& record) {
      std::scoped_lock lock(mutex);
      producer_threads.insert(std::this_thread::get_id());
      return record;
    };
    crema::double_buffered_pipeline pipe{
        numbers(100), note_thread, {.batch_size = 4, .prefetch = 2, .producers = 8, .threads = 2}};
    auto consumer = pipe.consumer(0);
    const auto every_producer_suspended = [&] {
      const auto counts = pipe.stats().suspensions_by_producer;
      return std::all_of(counts.begin(), counts.end(), [](auto n) { return n > 0; });
    };
    while (!every_producer_suspended()) {
      auto batch = consumer.pull();
      REQUIRE(batch);
      std::this_thread::sleep_for(100us);  // a slow consumer: the pool runs dry
    }
    pipe.stop();
    CHECK(pipe.stats().suspensions_by_producer.size() == 8);
    std::scoped_lock lock(mutex);
    CHECK(producer_threads.size() <= 2);
    CHECK(producer_threads.count(std::this_thread::get_id()) == 0);
  }

  TEST_CASE("in ordered mode a consumer sees the records in source order") {
    watchdog guard(30s, "ordered");
    for (const std::size_t producers : {1U, 3U, 8U}) {
      CAPTURE(producers);
      const auto slow_sometimes = [](const int& record) {
        if (record % 13 == 0) std::this_thread::sleep_for(50us);  // producers finish out of order
        return record;
      };
      crema::double_buffered_pipeline pipe{numbers(2000),
                                           slow_sometimes,
                                           {.batch_size = 7,
                                            .prefetch = 4,
                                            .producers = producers,
                                            .threads = 2,
                                            .mode = pipeline_mode::single_pass,
                                            .ordered = true}};
      std::vector<int> seen;
      std::uint64_t expected_sequence = 0;
      for (auto batch : pipe.consumer(0)) {
        CHECK(batch->sequence() == expected_sequence++);
        for (int value : *batch) seen.push_back(value);
      }
      CHECK(seen == first_numbers(2000));
    }
  }

  TEST_CASE("a batch an ordered consumer took ahead of its turn still counts as queued") {
    watchdog guard(30s, "ordered queued");
    crema::test::gate first_record;
    const auto held_first = [&](const int& record) {
      if (record == 0) first_record.wait();
      return record;
    };
    crema::double_buffered_pipeline pipe{numbers(8),
                                         held_first,
                                         {.batch_size = 4,
                                          .prefetch = 2,
                                          .producers = 2,
                                          .threads = 2,
                                          .mode = pipeline_mode::single_pass,
                                          .ordered = true}};
    // Batch 1 is finished while batch 0 waits in its transform.
    while (pipe.stats().queued_batches == 0) std::this_thread::sleep_for(1ms);
    auto consumer = pipe.consumer(0);
    CHECK_FALSE(consumer.try_pull());  // takes batch 1 into the reorder window: not its turn
    const crema::pipeline_stats early = pipe.stats();
    CHECK(early.queued_batches == 1);
    CHECK(early.consumers[0].queued_batches == 1);
    CHECK(early.batches_consumed == 0);
    first_record.open();
    for (const std::uint64_t expected : {0U, 1U}) {
      auto batch = consumer.pull();
      REQUIRE(batch);
      CHECK(batch->sequence() == expected);
    }
    CHECK(pipe.stats().queued_batches == 0);
  }

  TEST_CASE("queued batches are batches alone: neither the end of a pass nor a stop counts") {
    watchdog guard(30s, "queued markers");
    // Two batches fill both slots; the pass's end and the stop's wake-up go into the same queue
    // behind them, and are no batches a consumer could take.
    crema::double_buffered_pipeline pipe{numbers(8),
                                         identity,
                                         {.batch_size = 4,
                                          .prefetch = 2,
                                          .producers = 2,
                                          .threads = 2,
                                          .mode = pipeline_mode::single_pass}};
    while (pipe.stats().queued_batches < 2) std::this_thread::sleep_for(1ms);
    pipe.stop();
    const crema::pipeline_stats stopped = pipe.stats();
    CHECK(stopped.queued_batches == 2);
    CHECK(stopped.consumers[0].queued_batches == 2);
  }

  TEST_CASE("batches are dealt to several consumers and the last batch of a pass may be short") {
    watchdog guard(30s, "consumers");
    crema::double_buffered_pipeline pipe{numbers(100),
                                         identity,
                                         {.batch_size = 8,
                                          .prefetch = 2,
                                          .producers = 2,
                                          .threads = 2,
                                          .consumers = 3,
                                          .mode = pipeline_mode::single_pass,
                                          .ordered = true}};
    const auto delivered = crema::test::drain_on_threads(pipe);
    std::vector<int> all;
    std::size_t short_batches = 0;
    for (const auto& consumer : delivered) {
      CHECK_FALSE(consumer.records.empty());  // every consumer got a share
      CHECK(std::is_sorted(consumer.records.begin(), consumer.records.end()));
      all.insert(all.end(), consumer.records.begin(), consumer.records.end());
      short_batches += consumer.short_batches;
    }
    std::sort(all.begin(), all.end());
    CHECK(all == first_numbers(100));
    CHECK(short_batches == 1);  // 100 = 12 * 8 + 4
  }

  TEST_CASE("the last, short batch of a single pass is kept, dropped or padded, as asked") {
    watchdog guard(30s, "last batch");
    // An augmentation that depends on the record's origin: a repeat gets the same one.
    const auto tagged = [](const int& record, const crema::sample_context& context) {
      return std::pair{record, context.rng()()};
    };
    for (const auto last :
         {crema::partial_batch::keep, crema::partial_batch::drop, crema::partial_batch::pad}) {
      for (const std::size_t producers : {1U, 3U}) {
        CAPTURE(static_cast<int>(last));
        CAPTURE(producers);
        crema::double_buffered_pipeline pipe{numbers(103),
                                             tagged,
                                             {.batch_size = 10,
                                              .producers = producers,
                                              .threads = 2,
                                              .mode = pipeline_mode::single_pass,
                                              .last_batch = last,
                                              .ordered = true,
                                              .seed = 5}};
        std::vector<std::pair<int, std::uint64_t>> seen;
        std::vector<std::size_t> sizes;
        std::vector<std::size_t> paddings;
        for (auto batch : pipe.consumer(0)) {
          sizes.push_back(batch.size());
          paddings.push_back(batch->padding());
          CHECK(batch.info().padding == batch->padding());
          seen.insert(seen.end(), batch->begin(), batch->end());
        }
        std::vector<int> records;
        for (const auto& [record, draw] : seen) records.push_back(record);
        std::vector<int> expected = first_numbers(103);
        if (last == crema::partial_batch::keep) {
          CHECK(sizes.size() == 11);
          CHECK(sizes.back() == 3);
          CHECK(paddings.back() == 0);
        } else if (last == crema::partial_batch::drop) {
          CHECK(sizes == std::vector<std::size_t>(10, 10));
          expected.resize(100);
        } else {
          CHECK(sizes == std::vector<std::size_t>(11, 10));
          CHECK(paddings.back() == 7);
          for (const int repeat : {100, 101, 102, 100, 101, 102, 100}) expected.push_back(repeat);
          // A repeated record is the same sample: the same origin, the same augmentation.
          REQUIRE(seen.size() == 110);
          for (std::size_t i = 103; i < 110; ++i) CHECK(seen[i] == seen[100 + (i - 103) % 3]);
        }
        CHECK(records == expected);
        CHECK(std::accumulate(paddings.begin(), paddings.end(), std::size_t{0}) ==
              (last == crema::partial_batch::pad ? 7U : 0U));
      }
    }
  }

  TEST_CASE("repeat mode rewinds the source and counts epochs") {
    watchdog guard(30s, "repeat");
    crema::double_buffered_pipeline pipe{
        numbers(10), identity, {.batch_size = 4, .prefetch = 2, .ordered = true}};
    auto consumer = pipe.consumer(0);
    std::vector<int> seen;
    for (int i = 0; i < 10; ++i) {
      auto batch = consumer.pull();
      REQUIRE(batch);
      for (int value : *batch) seen.push_back(value);
    }
    for (std::size_t i = 0; i < seen.size(); ++i) CHECK(seen[i] == static_cast<int>(i % 10));
    CHECK(pipe.stats().epochs >= 3);
  }

  TEST_CASE("slots are made once and reused, never reallocated") {
    watchdog guard(30s, "slot reuse");
    crema::test::counted::reset();
    struct fill_counted {
      using item_type = crema::test::counted;
      void operator()(const int& record, crema::test::counted& item) const { item.value = record; }
    };
    {
      crema::double_buffered_pipeline pipe{
          numbers(50),
          fill_counted{},
          {.batch_size = 16, .prefetch = 3, .producers = 2, .threads = 2, .consumers = 2}};
      std::thread second([&] {
        auto consumer = pipe.consumer(1);
        for (int i = 0; i < 200; ++i) (void)consumer.pull();
      });
      auto consumer = pipe.consumer(0);
      for (int i = 0; i < 200; ++i) {
        auto batch = consumer.pull();
        REQUIRE(batch);
        CHECK(batch->size() == 16);
      }
      second.join();
      CHECK(crema::test::counted::constructed == 2 * 3 * 16);  // consumers * prefetch * batch
    }
    CHECK(crema::test::counted::destroyed == crema::test::counted::constructed);
  }

  TEST_CASE("a lease returns its slot when it dies") {
    watchdog guard(30s, "lease");
    crema::double_buffered_pipeline pipe{numbers(100), identity, {.batch_size = 1, .prefetch = 2}};
    auto consumer = pipe.consumer(0);
    auto first = consumer.pull();
    auto second = consumer.pull();
    REQUIRE(first);
    REQUIRE(second);
    CHECK_THROWS_WITH_AS((void)consumer.pull(),
                         "pipeline: consumer 0 holds all 2 of its slots; release a lease before "
                         "pulling again",
                         crema::pipeline_error);
    first.reset();
    CHECK(consumer.pull());  // the slot came back and was refilled
  }
}

TEST_SUITE("double_buffered_pipeline stop") {
  TEST_CASE("stop returns promptly while producers are suspended on a full pool") {
    watchdog guard(20s, "stop with producers suspended");
    crema::double_buffered_pipeline pipe{
        numbers(1000), identity, {.batch_size = 4, .prefetch = 2, .producers = 4, .threads = 2}};
    // Nobody consumes: both slots fill up and all four producers end up waiting for one.
    while (pipe.stats().waiting_producers < 4) std::this_thread::sleep_for(1ms);
    CHECK(pipe.stats().queued_batches == 2);
    pipe.stop();
    CHECK_FALSE(pipe.consumer(0).pull());
  }

  TEST_CASE("stop wakes a consumer waiting for data") {
    watchdog guard(20s, "stop with consumer waiting");
    crema::test::gate never_before_stop;
    std::atomic<bool> in_transform{false};
    const auto slow = [&](const int& record) {
      in_transform = true;
      std::this_thread::sleep_for(20ms);
      return record;
    };
    crema::double_buffered_pipeline pipe{numbers(1000), slow, {.batch_size = 64}};
    std::atomic<bool> ended{false};
    std::thread consumer([&] {
      auto handle = pipe.consumer(0);
      while (handle.pull()) {
      }
      ended = true;
    });
    while (!in_transform) std::this_thread::sleep_for(1ms);
    pipe.stop();
    consumer.join();
    CHECK(ended.load());
  }

  TEST_CASE("stop waits for a transform that is still running, then returns") {
    watchdog guard(20s, "stop with transform running");
    crema::test::gate release_transform;
    std::atomic<bool> in_transform{false};
    std::atomic<bool> transform_done{false};
    const auto blocked = [&](const int& record) {
      in_transform = true;
      release_transform.wait();
      transform_done = true;
      return record;
    };
    crema::double_buffered_pipeline pipe{numbers(10), blocked, {.batch_size = 1}};
    while (!in_transform) std::this_thread::sleep_for(1ms);
    std::atomic<bool> stopped{false};
    std::thread stopper([&] {
      pipe.stop();
      stopped = true;
    });
    std::this_thread::sleep_for(20ms);
    CHECK_FALSE(stopped.load());  // the transform is still running
    release_transform.open();
    stopper.join();
    CHECK(transform_done.load());
    CHECK(stopped.load());
  }

  TEST_CASE("stop mid-epoch, with batches queued and leases held, frees everything") {
    watchdog guard(20s, "stop mid-epoch");
    crema::test::counted::reset();
    struct fill_counted {
      using item_type = crema::test::counted;
      void operator()(const int& record, crema::test::counted& item) const { item.value = record; }
    };
    crema::double_buffered_pipeline<crema::vector_source<int>, fill_counted>::lease_type kept;
    {
      crema::double_buffered_pipeline pipe{
          numbers(100),
          fill_counted{},
          {.batch_size = 8, .prefetch = 3, .producers = 2, .threads = 2}};
      auto consumer = pipe.consumer(0);
      kept = consumer.pull();
      (void)consumer.pull();
    }  // destroyed with a lease still out
    REQUIRE(kept);
    CHECK(kept->size() == 8);  // the slot outlives the pipeline
    kept.reset();
    CHECK(crema::test::counted::destroyed == crema::test::counted::constructed);
  }

  TEST_CASE("a thousand pipelines are made, used and destroyed cleanly") {
    watchdog guard(120s, "1000 cycles");
    for (int cycle = 0; cycle < 1000; ++cycle) {
      crema::double_buffered_pipeline pipe{
          numbers(37),
          identity,
          {.batch_size = 5,
           .prefetch = 2,
           .producers = 1 + static_cast<std::size_t>(cycle % 3),
           .threads = 1 + static_cast<std::size_t>(cycle % 2),
           .consumers = 1,
           .mode = cycle % 2 == 0 ? pipeline_mode::single_pass : pipeline_mode::repeat}};
      auto consumer = pipe.consumer(0);
      for (int pulls = 0; pulls < cycle % 4; ++pulls) (void)consumer.pull();
    }
  }
}

TEST_SUITE("double_buffered_pipeline errors") {
  TEST_CASE(
      "a transform that throws reaches every consumer as a pipeline_error naming the record") {
    watchdog guard(20s, "transform error");
    const auto breaks_on_17 = [](const int& record) {
      if (record == 17) throw std::invalid_argument("bad pixel");
      return record;
    };
    crema::double_buffered_pipeline pipe{
        numbers(100),
        breaks_on_17,
        {.batch_size = 4, .prefetch = 2, .producers = 2, .threads = 2, .consumers = 2}};
    for (std::size_t index : {0U, 1U}) {
      auto consumer = pipe.consumer(index);
      try {
        while (consumer.pull()) {
        }
        FAIL("expected a pipeline_error");
      } catch (const crema::pipeline_error& e) {
        CHECK(std::string(e.what()) ==
              "pipeline: transform failed on record 17 (pass 0) of vector:numbers");
        try {
          std::rethrow_if_nested(e);
          FAIL("the original exception was not nested");
        } catch (const std::invalid_argument& original) {
          CHECK(std::string(original.what()) == "bad pixel");
        }
      }
    }
  }

  TEST_CASE("a source that throws reaches the consumer as a pipeline_error naming the record") {
    watchdog guard(20s, "source error");
    crema::generator_source<int> broken(
        []() -> crema::generator<int> {
          for (int i = 0; i < 5; ++i) co_yield i;
          throw std::runtime_error("disk gone");
        },
        "broken");
    crema::double_buffered_pipeline pipe{std::move(broken), identity, {.batch_size = 2}};
    auto consumer = pipe.consumer(0);
    std::vector<int> seen;
    try {
      while (auto batch = consumer.pull()) {
        for (int value : *batch) seen.push_back(value);
      }
      FAIL("expected a pipeline_error");
    } catch (const crema::pipeline_error& e) {
      CHECK(std::string(e.what()) ==
            "pipeline: source generator:broken failed reading record 5 (pass 0)");
    }
    CHECK(seen == first_numbers(5));  // every record read before the failure arrives first
  }

  TEST_CASE("a transform whose copy throws fails the pipeline instead of ending the program") {
    watchdog guard(20s, "transform copy");
    struct refuses_copies {
      refuses_copies() = default;
      refuses_copies(const refuses_copies&) { throw std::runtime_error("no copies"); }
      refuses_copies(refuses_copies&&) noexcept = default;
      int operator()(const int& record) const { return record; }
    };
    crema::double_buffered_pipeline pipe{numbers(10), refuses_copies{}, {.producers = 2}};
    CHECK_THROWS_WITH_AS((void)pipe.consumer(0).pull(),
                         doctest::Contains("pipeline: copying the transform for producer"),
                         crema::pipeline_error);
  }

  TEST_CASE("repeating an empty source is a pipeline_error, not a hang") {
    watchdog guard(20s, "empty repeat");
    crema::double_buffered_pipeline pipe{numbers(0, "empty"), identity, {.batch_size = 2}};
    try {
      (void)pipe.consumer(0).pull();
      FAIL("expected a pipeline_error");
    } catch (const crema::pipeline_error& e) {
      CHECK(std::string(e.what()) ==
            "pipeline: source vector:empty failed reading record 0 (pass 1)");
      CHECK_THROWS_WITH_AS(std::rethrow_if_nested(e),
                           "pipeline: source vector:empty has no records to repeat",
                           crema::pipeline_error);
    }
  }

  TEST_CASE("by default every producer has a slot to fill, so all of them work at once") {
    watchdog guard(60s, "slots for every producer");
    // One record a batch; each transform call waits until `producers` calls are inside at once
    // (or `patience` passes), so the most seen inside at once is how many producers could fill
    // a slot.
    const auto most_filling_at_once = [](crema::pipeline_options options,
                                         std::chrono::milliseconds patience) {
      std::mutex mutex;
      std::condition_variable changed;
      std::size_t inside = 0;
      std::size_t most = 0;
      const std::size_t producers = options.producers;
      const auto wait_for_all = [&](const int& record) {
        std::unique_lock lock(mutex);
        most = std::max(most, ++inside);
        changed.notify_all();
        changed.wait_for(lock, patience, [&] { return most >= producers; });
        --inside;
        return record;
      };
      crema::double_buffered_pipeline pipe{numbers(1000), wait_for_all, options};
      auto consumer = pipe.consumer(0);
      for (std::size_t i = 0; i < 2 * producers; ++i) REQUIRE(consumer.pull());
      pipe.stop();
      std::scoped_lock lock(mutex);
      return std::pair(most, pipe.options().prefetch);
    };
    for (const std::size_t producers : {2U, 8U, 16U}) {
      CAPTURE(producers);
      const auto [most, slots] = most_filling_at_once(
          {.batch_size = 1, .producers = producers, .threads = producers}, 10s);
      CHECK(slots == std::max<std::size_t>(4, producers + 2));
      CHECK(most == producers);
    }
    // Two consumers share the producers: each has slots for half of them, and two more.
    crema::double_buffered_pipeline two{
        numbers(10), identity, {.producers = 9, .threads = 9, .consumers = 2}};
    CHECK(two.options().prefetch == 7);
    // Producers fill on threads: no more batches are filled at once than there are threads.
    crema::double_buffered_pipeline shared{numbers(10), identity, {.producers = 16, .threads = 8}};
    CHECK(shared.options().prefetch == 10);
    // Fewer slots than producers, asked for: the producers without one wait.
    const auto [most, slots] =
        most_filling_at_once({.batch_size = 1, .prefetch = 3, .producers = 8, .threads = 8}, 20ms);
    CHECK(slots == 3);
    CHECK(most <= 3);
  }

  TEST_CASE("a zero count in the options is a config_error naming the field") {
    const auto make = [](crema::pipeline_options options) {
      crema::double_buffered_pipeline pipe{numbers(10), identity, options};
    };
    CHECK_THROWS_WITH_AS(make({.batch_size = 0}), "pipeline: batch_size must be at least 1, got 0",
                         crema::config_error);
    CHECK_THROWS_WITH_AS(make({.producers = 0}), "pipeline: producers must be at least 1, got 0",
                         crema::config_error);
    CHECK_THROWS_WITH_AS(make({.threads = 0}), "pipeline: threads must be at least 1, got 0",
                         crema::config_error);
    CHECK_THROWS_WITH_AS(make({.consumers = 0}), "pipeline: consumers must be at least 1, got 0",
                         crema::config_error);
    crema::double_buffered_pipeline pipe{numbers(10), identity, {.consumers = 2}};
    CHECK_THROWS_WITH_AS((void)pipe.consumer(2), "pipeline: consumer 2 does not exist, there are 2",
                         crema::config_error);
  }
}

TEST_SUITE("double_buffered_pipeline stats") {
  TEST_CASE("stats count what moved and format on one line") {
    watchdog guard(20s, "stats");
    crema::double_buffered_pipeline pipe{
        numbers(30), identity, {.batch_size = 10, .mode = pipeline_mode::single_pass}};
    for (auto batch : pipe.consumer(0)) (void)batch;
    const auto stats = pipe.stats();
    CHECK(stats.batches_produced == 3);
    CHECK(stats.records_produced == 30);
    CHECK(stats.batches_consumed == 3);
    CHECK(stats.queued_batches == 0);
    const std::string line = fmt::format("{}", stats);
    CHECK(line.find("produced 3 batches (30 records), consumed 3") == 0);
    CHECK(line.find("woken by consumers") != std::string::npos);
    CHECK(line.find('\n') == std::string::npos);
  }

  TEST_CASE("a consumer slower than its producers rarely pays to wake them: an idle one polls") {
    watchdog guard(60s, "polling producers");
    crema::double_buffered_pipeline pipe{
        numbers(1000), identity, {.batch_size = 4, .prefetch = 4, .producers = 2, .threads = 2}};
    auto consumer = pipe.consumer(0);
    constexpr int batches = 100;
    for (int i = 0; i < batches; ++i) {
      auto batch = consumer.pull();
      REQUIRE(batch);
      // The training step: the producers fill the free slots meanwhile and wait for more.
      std::this_thread::sleep_for(1ms);
    }
    const auto stats = pipe.stats();
    CHECK(stats.producer_suspensions >= batches / 2);  // they did wait for released slots
    // Woken by the consumer's releases, that would be one wake-up per two slots (50); the
    // poller takes them all but the first few, before it has learned the consumer's pace.
    CHECK(stats.producer_wakeups < batches / 5);
    CHECK(stats.consumers[0].producer_wakeups == stats.producer_wakeups);
  }

  TEST_CASE(
      "slots given back by a consumer away longer than the poller waits are refilled before it "
      "comes back") {
    // A training loop whose steps outlast the poller's longest interval: its releases must wake
    // the producers themselves, or the batches it comes back for are not made.
    watchdog guard(60s, "refill while away");
    constexpr std::size_t slots = 8;
    crema::double_buffered_pipeline pipe{
        numbers(1000), identity, {.batch_size = 4, .prefetch = slots, .producers = 2, .threads = 2}};
    auto consumer = pipe.consumer(0);
    const auto all_queued_within = [&](std::chrono::milliseconds limit) {
      const auto until = std::chrono::steady_clock::now() + limit;
      while (pipe.stats().queued_batches < slots && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(5ms);
      }
      return pipe.stats().queued_batches;
    };
    for (int round = 0; round < 3; ++round) {
      CAPTURE(round);
      REQUIRE(all_queued_within(5s) == slots);
      std::this_thread::sleep_for(50ms);  // away: the poller has stopped polling
      for (std::size_t i = 0; i < slots - 2; ++i) REQUIRE(consumer.pull());  // each given back
      CHECK(all_queued_within(2s) == slots);
    }
  }

  // Batches of two records, each taking `per_record`; the consumer gives every batch back at
  // once. How many of `batches` came in the slot of the batch before, and the stats.
  const auto refills_of = [](std::chrono::milliseconds per_record, std::chrono::microseconds wait,
                             int batches) {
    const auto slow = [per_record](const int& record) {
      std::this_thread::sleep_for(per_record);
      return record;
    };
    crema::double_buffered_pipeline pipe{
        numbers(1000),
        slow,
        {.batch_size = 2, .prefetch = 4, .producers = 1, .threads = 1, .warm_refill_wait = wait}};
    auto consumer = pipe.consumer(0);
    const int* last = nullptr;
    int same_slot = 0;
    for (int i = 0; i < batches; ++i) {
      auto batch = consumer.pull();
      REQUIRE(batch);
      same_slot += batch->items().data() == last ? 1 : 0;
      last = batch->items().data();
    }
    return std::pair{same_slot, pipe.stats()};
  };

  TEST_CASE("a producer whose consumer keeps up refills the slot it handed on last") {
    watchdog guard(60s, "warm refills");
    // Fills of 200 ms, waits of up to 25 ms (an eighth of a fill): time enough for the consumer
    // to wake and give the batch back on a loaded machine too, where a few missed waits, and the
    // skips after each, would leave too few refills.
    constexpr int batches = 20;
    const auto [same_slot, stats] = refills_of(100ms, 50ms, batches);
    // Taking a slot at once, the producer would not get the one its consumer still holds: the
    // batches would come in another slot than the one before, and the four would go round. The
    // first four fills make no wait: the producer has not seen enough of them.
    CHECK(same_slot >= (batches - 4) / 2);
    CHECK(stats.warm_refills >= static_cast<std::uint64_t>((batches - 4) / 2));
    CHECK(fmt::format("{}", stats).find("refilled warm") != std::string::npos);
  }

  TEST_CASE("warm_refill_wait 0: producers take the next free slot at once") {
    watchdog guard(60s, "no warm refills");
    constexpr int batches = 10;
    // Fills long enough that a wait would be made, and counted.
    const auto stats = refills_of(5ms, 0us, batches).second;
    CHECK(stats.warm_refills == 0);
  }

  TEST_CASE("small batches, made faster than a consumer gives them back, never wait for slots") {
    watchdog guard(60s, "no warm refills");
    crema::double_buffered_pipeline pipe{
        numbers(1000), identity, {.batch_size = 4, .prefetch = 4, .producers = 2, .threads = 2}};
    auto consumer = pipe.consumer(0);
    for (int i = 0; i < 500; ++i) REQUIRE(consumer.pull());
    CHECK(pipe.stats().warm_refills == 0);
    CHECK(fmt::format("{}", pipe.stats()).find("refilled warm") == std::string::npos);
  }
}

TEST_SUITE("warm_refill") {
  using crema::detail::warm_refill;
  const auto never_stopped = [] { return false; };

  TEST_CASE("waits only for the channel it handed on to, once, and only after long fills") {
    int channel = 0;
    int other = 0;
    std::atomic<std::uint64_t> returned{5};
    warm_refill warm(200us);
    CHECK_FALSE(warm.wait(&channel, returned, never_stopped));  // nothing handed on yet
    for (int fill = 0; fill < 3; ++fill) warm.handing_on(&channel, 4, 2ms);
    CHECK_FALSE(warm.wait(&other, returned, never_stopped));
    warm.handing_on(&channel, 4, 2ms);
    CHECK(warm.wait(&channel, returned, never_stopped));        // one came back since
    CHECK_FALSE(warm.wait(&channel, returned, never_stopped));  // once per batch handed on
    warm_refill quick(200us);
    for (int fill = 0; fill < 4; ++fill) {
      quick.handing_on(&channel, 4, 40us);  // an eighth of it is less than the shortest wait
    }
    CHECK_FALSE(quick.wait(&channel, returned, never_stopped));
    CHECK(warm.refills() == 1);
    CHECK(quick.refills() == 0);
  }

  TEST_CASE("waits only once four fills are seen, and one slow fill among fast ones makes none") {
    int channel = 0;
    std::atomic<std::uint64_t> returned{5};
    warm_refill warm(200us);
    for (int fill = 0; fill < 3; ++fill) {
      warm.handing_on(&channel, 4, 2ms);
      CHECK_FALSE(warm.wait(&channel, returned, never_stopped));
    }
    warm.handing_on(&channel, 4, 2ms);
    CHECK(warm.wait(&channel, returned, never_stopped));
    warm_refill fast(200us);
    for (int fill = 0; fill < 4; ++fill) fast.handing_on(&channel, 4, 40us);
    fast.handing_on(&channel, 4, 10ms);  // a fill its thread was preempted in
    CHECK_FALSE(fast.wait(&channel, returned, never_stopped));
    CHECK(fast.refills() == 0);
  }

  TEST_CASE("a wait that ends with nothing back skips the next 1, 2, 4 ... 64") {
    int channel = 0;
    std::atomic<std::uint64_t> returned{0};
    warm_refill warm(200us);
    for (int fill = 0; fill < 3; ++fill) warm.handing_on(&channel, 0, 100us);  // seen before
    // One batch handed on and the wait before the next: a slot comes back or not (waiting
    // 12.5 us at most); true if the wait got it.
    const auto attempt = [&](bool comes_back) {
      warm.handing_on(&channel, returned.load(), 100us);
      if (comes_back) ++returned;
      return warm.wait(&channel, returned, never_stopped);
    };
    CHECK_FALSE(attempt(false));  // a miss
    CHECK_FALSE(attempt(true));   // skipped
    CHECK_FALSE(attempt(false));  // a second miss in a row
    CHECK_FALSE(attempt(true));   // skipped twice
    CHECK_FALSE(attempt(true));
    CHECK(attempt(true));  // waits again, and a refill starts the count again
    CHECK_FALSE(attempt(false));
    CHECK_FALSE(attempt(true));
    CHECK(attempt(true));
    for (int miss = 0; miss < 10; ++miss) {  // the skips grow to 64, no further
      CHECK_FALSE(attempt(false));
      for (int skip = 0; skip < (1 << std::min(miss, 6)); ++skip) CHECK_FALSE(attempt(true));
    }
    CHECK(attempt(true));
    CHECK(warm.refills() == 3);
    CHECK(warm.missed() == 13);
  }

  TEST_CASE("a stop ends the wait") {
    int channel = 0;
    std::atomic<std::uint64_t> returned{0};
    warm_refill warm(200us);
    for (int fill = 0; fill < 4; ++fill) warm.handing_on(&channel, 0, 10s);
    int asked = 0;
    CHECK_FALSE(warm.wait(&channel, returned, [&] { return ++asked > 0; }));
    CHECK(asked == 1);  // asked after the first look
  }
}

TEST_SUITE("source_registry") {
  TEST_CASE("pipelines of the same source key share one reader and split its records") {
    watchdog guard(30s, "registry");
    crema::source_registry registry;
    std::vector<int> first_seen;
    std::vector<int> second_seen;
    {
      crema::double_buffered_pipeline first{numbers(500, "shared"),
                                            identity,
                                            {.batch_size = 5,
                                             .prefetch = 2,
                                             .mode = pipeline_mode::single_pass,
                                             .registry = &registry}};
      CHECK(registry.live_count() == 1);
      crema::double_buffered_pipeline second{numbers(500, "shared"),
                                             identity,
                                             {.batch_size = 5,
                                              .prefetch = 2,
                                              .mode = pipeline_mode::single_pass,
                                              .registry = &registry}};
      CHECK(registry.live_count() == 1);
      std::thread other([&] {
        for (auto batch : second.consumer(0)) {
          for (int value : *batch) second_seen.push_back(value);
        }
      });
      for (auto batch : first.consumer(0)) {
        for (int value : *batch) first_seen.push_back(value);
      }
      other.join();
      crema::double_buffered_pipeline unrelated{
          numbers(5, "other"), identity, {.registry = &registry}};
      CHECK(registry.live_count() == 2);
    }
    CHECK(registry.live_count() == 0);  // the shared reader died with its last pipeline
    std::vector<int> all = first_seen;
    all.insert(all.end(), second_seen.begin(), second_seen.end());
    std::sort(all.begin(), all.end());
    CHECK(all == first_numbers(500));  // disjoint, and together the whole source
  }

  TEST_CASE("a key shared by two source types is a config_error") {
    crema::source_registry registry;
    auto kept = registry.find_or_make<int>("k", [] { return std::make_shared<int>(1); });
    CHECK(*registry.find_or_make<int>("k", [] { return std::make_shared<int>(2); }) == 1);
    CHECK_THROWS_WITH_AS(
        (void)registry.find_or_make<double>("k", [] { return std::make_shared<double>(); }),
        "source_registry: key k is shared by a source of another type", crema::config_error);
  }
}
