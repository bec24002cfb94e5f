// The same seed gives the same batches, bytes included, whatever the producer, thread and
// consumer counts; another seed or another epoch gives other bytes.

#include <crema/pipeline/double_buffered_pipeline.hpp>

#include "common/watchdog.hpp"
#include "pipeline/numbers.hpp"

#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using crema::pipeline_mode;
using crema::test::first_numbers;
using crema::test::numbers;

// An augmentation that draws only from the record's own generator: a random "crop offset" and
// "mirror" and noise, as a Caffe transform would, and sleeps now and then so that producers
// finish out of order.
struct augment {
  using item_type = std::array<std::uint32_t, 4>;
  void operator()(const int& record, item_type& item, const crema::sample_context& sample) const {
    auto rng = sample.rng();
    item[0] = static_cast<std::uint32_t>(record);
    item[1] = static_cast<std::uint32_t>(rng.below(28));   // crop offset
    item[2] = rng.bernoulli(0.5) ? 1U : 0U;                // mirror
    item[3] = static_cast<std::uint32_t>(rng.uniform() * 1e9);  // noise
    if (record % 17 == 0) std::this_thread::sleep_for(20us);
  }
};

// What every consumer received, batch by batch: each batch as its items' words.
using received = std::vector<std::vector<std::vector<std::uint32_t>>>;

received run(std::size_t producers, std::size_t threads, std::size_t consumers,
             std::uint64_t seed, int records, std::size_t batches_each) {
  crema::double_buffered_pipeline pipe{numbers(records),
                                       augment{},
                                       {.batch_size = 5,
                                        .prefetch = 3,
                                        .producers = producers,
                                        .threads = threads,
                                        .consumers = consumers,
                                        .ordered = true,
                                        .seed = seed}};
  received got(consumers);
  std::vector<std::thread> pullers;
  for (std::size_t c = 0; c < consumers; ++c) {
    pullers.emplace_back([&, c] {
      auto consumer = pipe.consumer(c);
      for (std::size_t b = 0; b < batches_each; ++b) {
        auto batch = consumer.pull();
        std::vector<std::uint32_t> words;
        for (const auto& item : *batch) words.insert(words.end(), item.begin(), item.end());
        got[c].push_back(std::move(words));
      }
    });
  }
  for (auto& puller : pullers) puller.join();
  return got;
}

// The reference, computed serially: batch g of the source (records 5g .. 5g + 4, wrapping into
// the next pass) goes to consumer g mod n as its batch g / n, each record augmented with the
// generator of (seed, epoch, position).
received expected(std::size_t consumers, std::uint64_t seed, int records,
                   std::size_t batches_each) {
  received want(consumers);
  for (std::size_t g = 0; g < consumers * batches_each; ++g) {
    std::vector<std::uint32_t> words;
    for (std::size_t i = 0; i < 5; ++i) {
      const std::uint64_t global = g * 5 + i;
      const std::uint64_t epoch = global / static_cast<std::uint64_t>(records);
      const int record = static_cast<int>(global % static_cast<std::uint64_t>(records));
      crema::sample_context sample;
      sample.seed = seed;
      sample.epoch = epoch;
      sample.position = static_cast<crema::record_position>(record);
      augment::item_type item{};
      augment{}(record, item, sample);
      words.insert(words.end(), item.begin(), item.end());
    }
    want[g % consumers].push_back(std::move(words));
  }
  return want;
}

}  // namespace

TEST_SUITE("pipeline determinism") {
  TEST_CASE("the same seed gives the same batch bytes for every producer, thread and consumer "
            "count") {
    crema::test::watchdog guard(120s, "determinism grid");
    constexpr int records = 53;  // batches wrap into the next pass at different places
    constexpr std::size_t batches_each = 30;
    for (const std::size_t consumers : {1U, 2U, 3U}) {
      const received want = expected(consumers, 7, records, batches_each);
      for (const std::size_t producers : {1U, 3U, 8U}) {
        for (const std::size_t threads : {1U, 2U}) {
          CAPTURE(consumers);
          CAPTURE(producers);
          CAPTURE(threads);
          CHECK(run(producers, threads, consumers, 7, records, batches_each) == want);
        }
      }
    }
  }

  TEST_CASE("another seed, or another epoch of the same records, gives other bytes") {
    crema::test::watchdog guard(30s, "seed and epoch");
    const received seven = run(2, 2, 1, 7, 50, 20);
    const received eight = run(2, 2, 1, 8, 50, 20);
    REQUIRE(seven.size() == 1);
    CHECK(seven != eight);
    // Batches 0-9 are epoch 0 and batches 10-19 epoch 1 of the same 50 records: the records
    // match, their augmentations do not.
    std::size_t same_records = 0;
    std::size_t same_bytes = 0;
    for (std::size_t b = 0; b < 10; ++b) {
      const auto& first = seven[0][b];
      const auto& second = seven[0][b + 10];
      for (std::size_t i = 0; i < 5; ++i) {
        same_records += first[4 * i] == second[4 * i] ? 1 : 0;
        same_bytes += std::equal(first.begin() + 4 * i, first.begin() + 4 * i + 4,
                                 second.begin() + 4 * i)
                          ? 1
                          : 0;
      }
    }
    CHECK(same_records == 50);
    CHECK(same_bytes < 5);  // a chance coincidence at most
  }

  TEST_CASE("consumer c of n gets batches c, c + n, c + 2n, ... of the source, in order") {
    crema::test::watchdog guard(30s, "dealing");
    crema::double_buffered_pipeline pipe{numbers(60),
                                         crema::test::identity,
                                         {.batch_size = 4,
                                          .prefetch = 2,
                                          .producers = 4,
                                          .threads = 2,
                                          .consumers = 3,
                                          .mode = pipeline_mode::single_pass,
                                          .ordered = true}};
    std::vector<std::vector<int>> got(3);
    std::vector<std::thread> pullers;
    for (std::size_t c = 0; c < 3; ++c) {
      pullers.emplace_back([&, c] {
        for (auto batch : pipe.consumer(c)) {
          for (int value : *batch) got[c].push_back(value);
        }
      });
    }
    for (auto& puller : pullers) puller.join();
    for (std::size_t c = 0; c < 3; ++c) {
      std::vector<int> want;
      for (std::size_t g = c; g < 15; g += 3) {
        for (int i = 0; i < 4; ++i) want.push_back(static_cast<int>(g * 4) + i);
      }
      CHECK(got[c] == want);
    }
  }
}

TEST_SUITE("sample_rng") {
  TEST_CASE("a generator is a pure function of its key, and its draws are spread evenly") {
    crema::sample_rng a(1, 2, 3);
    crema::sample_rng b(1, 2, 3);
    for (int i = 0; i < 100; ++i) CHECK(a() == b());
    CHECK(crema::sample_rng(1, 2, 3)() != crema::sample_rng(1, 2, 4)());
    CHECK(crema::sample_rng(1, 2, 3)() != crema::sample_rng(1, 3, 3)());
    CHECK(crema::sample_rng(1, 2, 3)() != crema::sample_rng(2, 2, 3)());
    // Ten bins of 100,000 draws: each within 2% of its share.
    std::array<int, 10> bins{};
    crema::sample_rng rng(42, 0, 0);
    for (int i = 0; i < 100000; ++i) ++bins[rng.below(10)];
    for (int count : bins) CHECK(std::abs(count - 10000) < 200);
    double sum = 0;
    for (int i = 0; i < 100000; ++i) {
      const double u = rng.uniform();
      REQUIRE(u >= 0.0);
      REQUIRE(u < 1.0);
      sum += u;
    }
    CHECK(std::abs(sum / 100000 - 0.5) < 0.01);
    CHECK(rng.below(0) == 0);
  }
}
