// The pipeline under the faults a production user meets: a consumer woken late while the
// pipeline dies, errors on the error path, stop from inside a producer, a sibling that stops
// pulling, shared readers in two modes, a slow source, failures named exactly, absurd counts.
// Every case is bounded by a watchdog (a hang fails it) and forces its interleaving.

#include <crema/pipeline/device_batch.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/host_batch.hpp>

#include "common/gate.hpp"
#include "common/pipeline_failure.hpp"
#include "common/thread_limit.hpp"
#include "common/thread_pauser.hpp"
#include "common/watchdog.hpp"
#include "pipeline/numbers.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
using crema::pipeline_mode;
using crema::pull_status;
using crema::record_position;
using crema::test::watchdog;

using crema::test::first_numbers;
using crema::test::identity;
using crema::test::numbers;

// Numbers 0..count-1 with a hook called before each record is read (to slow the source down,
// or to act from inside it), and keys "k<n>" whose lookup throws for one record.
class hooked_numbers {
 public:
  using record_type = int;
  static constexpr bool records_are_stable = true;

  hooked_numbers(int count, std::function<void(record_position)> on_next, int unreadable_key = -1)
      : inner_(first_numbers(count), "hooked"),
        on_next_(std::move(on_next)),
        unreadable_key_(unreadable_key) {}

  const int* next() {
    if (on_next_) on_next_(inner_.position());
    return inner_.next();
  }
  void rewind() { inner_.rewind(); }
  void shard(std::size_t rank, std::size_t world) { inner_.shard(rank, world); }
  [[nodiscard]] record_position position() const { return inner_.position(); }
  void seek(record_position position) { inner_.seek(position); }
  [[nodiscard]] std::string key() const { return inner_.key(); }
  [[nodiscard]] std::string record_key(const int& record) const {
    if (record == unreadable_key_) throw std::runtime_error("key index unreadable");
    return fmt::format("k{}", record);
  }

 private:
  crema::vector_source<int> inner_;
  std::function<void(record_position)> on_next_;
  int unreadable_key_;
};

// A generator of 0, 1, ... that throws when asked for record `fail_at`.
crema::generator_source<int> failing_at(int fail_at) {
  return crema::generator_source<int>(
      [fail_at]() -> crema::generator<int> {
        for (int i = 0;; ++i) {
          if (i == fail_at) throw std::runtime_error("disk gone");
          co_yield i;
        }
      },
      "failing");
}

// What consumer 0 receives until its pipeline fails, and the failure: its message and the
// message of the exception nested in it (empty if the pipeline ended without failing).
struct drained_records {
  std::vector<int> records;
  std::string error;
  std::string cause;
};
template <class Pipeline>
drained_records drain_until_failure(Pipeline& pipe) {
  drained_records drained;
  try {
    for (auto batch : pipe.consumer(0)) {
      for (int value : *batch) drained.records.push_back(value);
    }
  } catch (const crema::pipeline_error& e) {
    drained.error = e.what();
    drained.cause = crema::test::nested_message(e);
  }
  return drained;
}

// Runs a pipeline whose producer calls `stop()` on it from inside (a transform or source calls
// `stop_from_inside()`), drains it, destroys it, and checks that that stop() returned.
// `run(stop_from_inside, drive)` builds the pipeline and hands it to `drive`.
template <class Run>
void check_stop_from_inside(Run run) {
  std::function<void()> stop_hook;
  std::atomic<bool> armed{false};
  std::atomic<bool> stop_returned{false};
  const auto stop_from_inside = [&] {
    while (!armed.load(std::memory_order_acquire)) std::this_thread::yield();
    stop_hook();
    stop_returned = true;
  };
  const auto drive = [&](auto& pipe) {
    stop_hook = [&pipe] { pipe.stop(); };
    armed.store(true, std::memory_order_release);
    auto consumer = pipe.consumer(0);
    while (consumer.pull()) {
    }
  };
  run(stop_from_inside, drive);  // the destructor waits for the producer that called stop
  CHECK(stop_returned.load());
}

}  // namespace

TEST_SUITE("pipeline faults: lifetime") {
  TEST_CASE(
      "a consumer blocked in pull while the pipeline is destroyed gets an empty lease, "
      "even when it runs late") {
    watchdog guard(60s, "destroy with a late consumer");
    crema::test::thread_pauser pauser;
    const auto slow = [](const int& record) {
      std::this_thread::sleep_for(2ms);  // the first batch takes seconds: the consumer waits
      return record;
    };
    for (int round = 0; round < 20; ++round) {
      CAPTURE(round);
      using pipeline_type =
          crema::double_buffered_pipeline<crema::vector_source<int>, decltype(slow)>;
      auto pipe = std::make_unique<pipeline_type>(numbers(5000), slow,
                                                  crema::pipeline_options{.batch_size = 1000});
      std::atomic<bool> pulling{false};
      std::atomic<int> outcome{-1};  // 0: empty lease, 1: a batch, 2: an exception
      std::thread consumer([&, handle = pipe->consumer(0)]() mutable {
        pulling = true;
        try {
          outcome = handle.pull() ? 1 : 0;
        } catch (...) {
          outcome = 2;
        }
      });
      while (!pulling) std::this_thread::yield();
      std::this_thread::sleep_for(2ms);  // into the wait
      pauser.pause(consumer.native_handle());
      pipe.reset();  // stops, wakes the consumer, and returns while it is held still
      pauser.resume();
      consumer.join();
      CHECK(outcome.load() == 0);
    }
  }

  TEST_CASE("a consumer handle used after its pipeline is gone pulls nothing") {
    watchdog guard(20s, "handle after destruction");
    std::optional<crema::double_buffered_pipeline<crema::vector_source<int>, decltype(identity)>>
        pipe;
    pipe.emplace(numbers(10), identity, crema::pipeline_options{});
    auto handle = pipe->consumer(0);
    pipe.reset();
    CHECK_FALSE(handle.pull());
    CHECK_FALSE(handle.try_pull());
    CHECK(handle.pull_for(10ms).status == pull_status::stopped);
  }
}

TEST_SUITE("pipeline faults: errors") {
  TEST_CASE(
      "a transform failure whose record key cannot be read still reaches the consumer as a "
      "pipeline_error") {
    watchdog guard(20s, "error while reporting an error");
    const auto breaks_on_3 = [](const int& record) {
      if (record == 3) throw std::invalid_argument("bad pixel");
      return record;
    };
    crema::double_buffered_pipeline pipe{
        hooked_numbers(20, nullptr, /*unreadable_key=*/3), breaks_on_3, {.batch_size = 2}};
    try {
      for (auto batch : pipe.consumer(0)) (void)batch;
      FAIL("expected a pipeline_error");
    } catch (const crema::pipeline_error& e) {
      CHECK(std::string(e.what()) ==
            "pipeline: transform failed on record 3 (pass 0) of "
            "vector:hooked");
      CHECK(crema::test::nested_message(e) == "bad pixel");
    }
  }

  TEST_CASE("a transform failure names the record's key when the source can say it") {
    watchdog guard(20s, "record key in errors");
    const auto breaks_on_3 = [](const int& record) {
      if (record == 3) throw std::invalid_argument("bad pixel");
      return record;
    };
    crema::double_buffered_pipeline pipe{hooked_numbers(20, nullptr), breaks_on_3, {}};
    CHECK_THROWS_WITH_AS(
        [&] {
          for (auto batch : pipe.consumer(0)) (void)batch;
        }(),
        "pipeline: transform failed on record 3 (pass 0) of vector:hooked (key k3)",
        crema::pipeline_error);
  }

  TEST_CASE(
      "a failing generator is named at the record it failed on, and every record before "
      "it arrives first") {
    watchdog guard(60s, "exact failure position");
    for (const int fail_at : {500, 1000}) {
      for (const std::size_t batch_size : {1U, 7U, 64U}) {
        CAPTURE(fail_at);
        CAPTURE(batch_size);
        crema::double_buffered_pipeline pipe{
            failing_at(fail_at), identity, {.batch_size = batch_size, .prefetch = 3}};
        const auto drained = drain_until_failure(pipe);
        CHECK(drained.error ==
              fmt::format("pipeline: source generator:failing failed reading record {} (pass 0)",
                          fail_at));
        CHECK(drained.cause == "disk gone");
        CHECK(drained.records == first_numbers(fail_at));  // nothing lost, nothing twice
      }
    }
  }

  TEST_CASE("a generator source hands out the last record before its generator fails") {
    auto source = failing_at(3);
    for (int expected = 0; expected < 3; ++expected) {
      const int* record = source.next();
      REQUIRE(record != nullptr);
      CHECK(*record == expected);
      CHECK(source.position() == static_cast<record_position>(expected + 1));
    }
    CHECK_THROWS_WITH_AS((void)source.next(), "disk gone", std::runtime_error);
    CHECK(source.position() == 3);  // the record it was reading
  }

  TEST_CASE("a failure in a batch that wraps into the next pass names the record and the pass") {
    watchdog guard(20s, "failure after a wrap");
    int calls = 0;  // one producer: calls come in source order
    const auto fails_on_twelfth = [&calls](const int& record) {
      if (++calls == 12) throw std::out_of_range("label out of range");
      return record;
    };
    crema::double_buffered_pipeline pipe{numbers(10), fails_on_twelfth, {.batch_size = 4}};
    const auto drained = drain_until_failure(pipe);
    // Batches 0-3, 4-7, then 8, 9, 0, 1: the twelfth record is record 1 of the second pass.
    CHECK(drained.error == "pipeline: transform failed on record 1 (pass 1) of vector:numbers");
    std::vector<int> expected = first_numbers(10);
    expected.push_back(0);  // the wrapped batch's records before the failing one
    CHECK(drained.records == expected);
  }
}

TEST_SUITE("pipeline faults: stop") {
  TEST_CASE(
      "stop called from inside a transform returns at once, and the pipeline is destroyed "
      "cleanly") {
    watchdog guard(20s, "stop from a transform");
    check_stop_from_inside([](auto stop_from_inside, auto drive) {
      const auto stops_on_5 = [=](const int& record) {
        if (record == 5) stop_from_inside();
        return record;
      };
      crema::double_buffered_pipeline pipe{
          numbers(100), stops_on_5, {.batch_size = 1, .producers = 3, .threads = 2}};
      drive(pipe);
    });
  }

  TEST_CASE("stop called from inside a source returns at once") {
    watchdog guard(20s, "stop from a source");
    check_stop_from_inside([](auto stop_from_inside, auto drive) {
      hooked_numbers source(100, [=](record_position position) {
        if (position == 7) stop_from_inside();
      });
      crema::double_buffered_pipeline pipe{std::move(source), identity, {.batch_size = 3}};
      drive(pipe);
    });
  }

  TEST_CASE("stop returns within a record's time while a slow source fills a batch") {
    watchdog guard(60s, "stop with a slow source");
    constexpr auto record_time = 20ms;
    for (const record_position stop_at : {3U, 10U, 25U}) {
      CAPTURE(stop_at);
      std::atomic<record_position> reading{0};
      hooked_numbers source(1000, [&](record_position position) {
        reading = position;
        std::this_thread::sleep_for(record_time);
      });
      crema::double_buffered_pipeline pipe{
          std::move(source), identity, {.batch_size = 50, .prefetch = 2}};
      while (reading.load() < stop_at) std::this_thread::sleep_for(1ms);  // mid-batch
      const auto asked = std::chrono::steady_clock::now();
      pipe.stop();
      const auto took = std::chrono::steady_clock::now() - asked;
      // Finishing the batch would take (50 - stop_at) records; a record and some slack is the
      // bound (the slack is wide for sanitizer builds on a busy machine).
      CHECK(took < record_time + 200ms);
      CHECK_FALSE(pipe.consumer(0).pull());
    }
  }
}

TEST_SUITE("pipeline faults: consumers held back") {
  TEST_CASE(
      "a consumer that stops pulling is named in the stats, and a pull with a deadline "
      "times out") {
    watchdog guard(30s, "stalled sibling, stats");
    crema::double_buffered_pipeline pipe{
        numbers(1000),
        identity,
        {.batch_size = 4, .prefetch = 2, .producers = 2, .threads = 2, .consumers = 2}};
    auto first = pipe.consumer(0);  // consumer 1 never pulls
    int delivered = 0;
    crema::pull_result<decltype(first.pull())> result;
    while ((result = first.pull_for(300ms))) ++delivered;
    CHECK(result.status == pull_status::timeout);
    CHECK_FALSE(result.batch);
    CHECK(delivered >= 2);  // its share until both producers wait for consumer 1

    std::atomic<int> status{-1};
    std::thread waiter([&] { status = static_cast<int>(first.pull_for(20s).status); });
    crema::pipeline_stats stats;
    do {
      std::this_thread::sleep_for(1ms);
      stats = pipe.stats();
    } while (!stats.held_back_by);
    CHECK(*stats.held_back_by == 1);
    REQUIRE(stats.consumers.size() == 2);
    CHECK(stats.consumers[0].pulling);
    CHECK(stats.consumers[1].queued_batches == 2);
    // One producer waits for consumer 1's slot, the other for its turn to claim behind it.
    CHECK(stats.consumers[1].waiting_producers >= 1);
    CHECK(stats.consumers[0].waiting_producers == 0);
    CHECK(stats.consumers[1].batches_consumed == 0);
    CHECK(fmt::format("{}", stats).find(", held back by consumer 1") != std::string::npos);
    pipe.stop();
    waiter.join();
    CHECK(status.load() == static_cast<int>(pull_status::stopped));
  }

  TEST_CASE("a blocking pull throws after stall_timeout, naming the consumer holding it back") {
    watchdog guard(30s, "stalled sibling, pull");
    crema::double_buffered_pipeline pipe{numbers(1000),
                                         identity,
                                         {.batch_size = 4,
                                          .prefetch = 2,
                                          .producers = 2,
                                          .threads = 2,
                                          .consumers = 2,
                                          .stall_timeout = 200ms}};
    auto first = pipe.consumer(0);
    try {
      while (first.pull()) {
      }
      FAIL("expected a pipeline_error");
    } catch (const crema::pipeline_error& e) {
      const std::string message = e.what();
      CHECK(message.find("pipeline: consumer 0 waited ") == 0);
      CHECK(message.find("the producers wait for a free slot of consumer 1 (2 queued, 0 "
                         "leased)") != std::string::npos);
    }
  }

  TEST_CASE(
      "a transform that does not return is named after hang_timeout: the producer, the "
      "record and what it was doing") {
    watchdog guard(30s, "hung transform");
    crema::test::gate release;
    const auto hangs_at_six = [&release](int record) {
      if (record == 6) release.wait();
      return record;
    };
    std::string message;
    {
      crema::double_buffered_pipeline pipe{
          numbers(100), hangs_at_six, {.batch_size = 4, .prefetch = 2, .hang_timeout = 200ms}};
      auto consumer = pipe.consumer(0);
      REQUIRE(consumer.pull());  // records 0 to 3
      const auto asked = std::chrono::steady_clock::now();
      try {
        while (consumer.pull()) {
        }
      } catch (const crema::pipeline_error& e) {
        message = e.what();
      }
      CHECK(std::chrono::steady_clock::now() - asked >= 200ms);
      release.open();  // the pipeline can stop once the transform returns
    }
    CHECK(message.find("pipeline: producer 0 has been transforming record 6 (pass 0) of ") == 0);
    CHECK(message.find("(hang_timeout 200 ms)") != std::string::npos);
  }

  TEST_CASE(
      "a consumer polling with pull_for waits shorter than hang_timeout still learns of a hung "
      "transform, named as pull() names it") {
    watchdog guard(30s, "hung transform, polled");
    crema::test::gate release;
    const auto hangs_at_six = [&release](int record) {
      if (record == 6) release.wait();
      return record;
    };
    std::string message;
    std::size_t timeouts = 0;
    {
      crema::double_buffered_pipeline pipe{
          numbers(100), hangs_at_six, {.batch_size = 4, .prefetch = 2, .hang_timeout = 200ms}};
      auto consumer = pipe.consumer(0);
      const auto asked = std::chrono::steady_clock::now();
      try {
        for (;;) {
          auto result = consumer.pull_for(20ms);
          if (result.status == crema::pull_status::timeout) ++timeouts;
          if (result.status == crema::pull_status::end) break;
        }
      } catch (const crema::pipeline_error& e) {
        message = e.what();
      }
      CHECK(std::chrono::steady_clock::now() - asked >= 200ms);
      release.open();
    }
    CHECK(timeouts >= 5);  // the hang spans many polls, none of them long enough alone
    CHECK(message.find("pipeline: producer 0 has been transforming record 6 (pass 0) of ") == 0);
    CHECK(message.find("(hang_timeout 200 ms)") != std::string::npos);
  }

  TEST_CASE("a source that does not return is named as reading its record") {
    watchdog guard(30s, "hung source");
    crema::test::gate release;
    std::string message;
    {
      crema::double_buffered_pipeline pipe{
          hooked_numbers(100,
                         [&release](record_position position) {
                           if (position == 5) release.wait();
                         }),
          identity,
          {.batch_size = 4, .prefetch = 2, .producers = 2, .threads = 2, .hang_timeout = 200ms}};
      auto consumer = pipe.consumer(0);
      try {
        while (consumer.pull()) {
        }
      } catch (const crema::pipeline_error& e) {
        message = e.what();
      }
      release.open();
    }
    CHECK(message.find("has been reading record 5 (pass 0) of vector:hooked for ") !=
          std::string::npos);
  }

  TEST_CASE("a slow transform that keeps going is not taken for a hung one") {
    watchdog guard(30s, "slow transform");
    const auto slow = [](int record) {
      std::this_thread::sleep_for(60ms);
      return record;
    };
    // A batch takes 240 ms, longer than the timeout; each record far less.
    crema::double_buffered_pipeline pipe{
        numbers(100), slow, {.batch_size = 4, .prefetch = 1, .hang_timeout = 150ms}};
    auto consumer = pipe.consumer(0);
    for (int i = 0; i < 4; ++i) CHECK_NOTHROW(CHECK(consumer.pull()));
  }

  TEST_CASE("a consumer holding its only lease is named as the one holding the others back") {
    watchdog guard(30s, "sibling holding its lease");
    crema::double_buffered_pipeline pipe{
        numbers(1000),
        identity,
        {.batch_size = 4, .prefetch = 1, .consumers = 2, .stall_timeout = 200ms}};
    auto kept = pipe.consumer(1).pull();  // and never let go
    REQUIRE(kept);
    auto first = pipe.consumer(0);
    CHECK_THROWS_WITH_AS(
        [&] {
          while (first.pull()) {
          }
        }(),
        doctest::Contains("free slot of consumer 1 (0 queued, 1 leased)"), crema::pipeline_error);
  }

  TEST_CASE(
      "a consumer that starts late holds the others up only until it starts: every record "
      "arrives once") {
    watchdog guard(60s, "late sibling");
    crema::double_buffered_pipeline pipe{numbers(1000),
                                         identity,
                                         {.batch_size = 5,
                                          .prefetch = 2,
                                          .producers = 3,
                                          .threads = 2,
                                          .consumers = 2,
                                          .mode = pipeline_mode::single_pass}};
    std::vector<int> seen_first;
    std::vector<int> seen_second;
    int timeouts = 0;
    std::thread early([&] {
      auto consumer = pipe.consumer(0);
      for (;;) {
        auto result = consumer.pull_for(50ms);
        if (result.status == pull_status::timeout) {
          ++timeouts;
          continue;
        }
        if (!result) break;
        for (int value : *result.batch) seen_first.push_back(value);
      }
    });
    std::this_thread::sleep_for(400ms);
    for (auto batch : pipe.consumer(1)) {
      for (int value : *batch) seen_second.push_back(value);
    }
    early.join();
    CHECK(timeouts > 0);  // it was held back, and said so
    std::vector<int> all = seen_first;
    all.insert(all.end(), seen_second.begin(), seen_second.end());
    std::sort(all.begin(), all.end());
    CHECK(all == first_numbers(1000));
  }
}

TEST_SUITE("pipeline faults: configuration") {
  TEST_CASE("a repeating and a single-pass pipeline cannot share one reader") {
    crema::source_registry registry;
    crema::double_buffered_pipeline repeating{
        numbers(100, "shared"), identity, {.mode = pipeline_mode::repeat, .registry = &registry}};
    CHECK_THROWS_WITH_AS(
        (crema::double_buffered_pipeline{
            numbers(100, "shared"),
            identity,
            {.mode = pipeline_mode::single_pass, .registry = &registry}}),
        "pipeline: source vector:shared is read by a repeating pipeline; a single-pass pipeline "
        "cannot share its reader (give it another key or registry)",
        crema::config_error);
    crema::double_buffered_pipeline evaluating{
        numbers(100, "other"),
        identity,
        {.mode = pipeline_mode::single_pass, .registry = &registry}};
    CHECK_THROWS_WITH_AS(
        (crema::double_buffered_pipeline{numbers(100, "other"),
                                         identity,
                                         {.mode = pipeline_mode::repeat, .registry = &registry}}),
        doctest::Contains("read by a single-pass pipeline; a repeating pipeline cannot share"),
        crema::config_error);
    // The refused pipelines left the readers in use untouched.
    CHECK(repeating.consumer(0).pull());
    CHECK(evaluating.consumer(0).pull());
  }

  TEST_CASE(
      "huge counts are refused before anything is allocated, naming the option and the "
      "bytes") {
    watchdog guard(20s, "huge counts");
    const auto make = [](crema::pipeline_options options) {
      crema::double_buffered_pipeline pipe{numbers(10), identity, options};
    };
    const std::size_t huge[] = {std::size_t{1} << 40, std::size_t{1} << 62, ~std::size_t{0}};
    for (const std::size_t count : huge) {
      CAPTURE(count);
      CHECK_THROWS_WITH_AS(make({.batch_size = count}),
                           doctest::Contains(fmt::format("batch_size {} ", count).c_str()),
                           crema::config_error);
      CHECK_THROWS_WITH_AS(make({.prefetch = count}),
                           doctest::Contains(fmt::format("prefetch {} ", count).c_str()),
                           crema::config_error);
      CHECK_THROWS_WITH_AS(make({.producers = count}),
                           doctest::Contains(fmt::format("producers {} ", count).c_str()),
                           crema::config_error);
      CHECK_THROWS_WITH_AS(make({.consumers = count}),
                           doctest::Contains(fmt::format("consumers {} ", count).c_str()),
                           crema::config_error);
      CHECK_THROWS_WITH_AS(make({.batch_size = count}), doctest::Contains(" bytes"),
                           crema::config_error);
    }
  }

  TEST_CASE(
      "a pipeline whose threads cannot all be started throws thread_error naming the "
      "counts") {
    crema::test::check_threads_refused(
        [] {
          crema::double_buffered_pipeline pipe{
              numbers(10), identity, {.producers = 1000, .threads = 1000}};
        },
        "thread_pool", 1000, 1);
  }

  TEST_CASE("a stall_timeout of zero or less is refused, and milliseconds::max() is accepted") {
    const auto make = [](std::chrono::milliseconds timeout) {
      crema::double_buffered_pipeline pipe{numbers(10), identity, {.stall_timeout = timeout}};
    };
    CHECK_THROWS_WITH_AS(
        make(0ms),
        "pipeline: stall_timeout must be positive (milliseconds::max() waits for ever), got 0 ms",
        crema::config_error);
    CHECK_THROWS_AS(make(-5ms), crema::config_error);
    make(std::chrono::milliseconds::max());
  }

  TEST_CASE("a hang_timeout of zero or less is refused, and milliseconds::max() is accepted") {
    const auto make = [](std::chrono::milliseconds timeout) {
      crema::double_buffered_pipeline pipe{numbers(10), identity, {.hang_timeout = timeout}};
    };
    CHECK_THROWS_WITH_AS(
        make(0ms),
        "pipeline: hang_timeout must be positive (milliseconds::max() never looks), got 0 ms",
        crema::config_error);
    CHECK_THROWS_AS(make(-5ms), crema::config_error);
    make(std::chrono::milliseconds::max());
  }

  TEST_CASE("a warm_refill_wait below 0 or past 1 s is refused, and 0 and 1 s are accepted") {
    const auto make = [](std::chrono::microseconds wait) {
      crema::double_buffered_pipeline pipe{numbers(10), identity, {.warm_refill_wait = wait}};
    };
    CHECK_THROWS_WITH_AS(
        make(-1us), "pipeline: warm_refill_wait must be from 0 to 1 s (0 never waits), got -1 us",
        crema::config_error);
    CHECK_THROWS_AS(make(std::chrono::microseconds::max()), crema::config_error);
    make(0us);
    make(1s);
  }

  TEST_CASE("a slot pool of more slots than memory holds is refused") {
    crema::thread_pool pool(1);
    using pool_type = crema::slot_pool<int, crema::thread_pool>;
    CHECK_THROWS_WITH_AS(pool_type(
                             std::size_t{1} << 62, [] { return 0; }, pool),
                         doctest::Contains("slots of 4 bytes do not fit in memory"),
                         crema::config_error);
  }
}

TEST_SUITE("pipeline faults: sources") {
  TEST_CASE("seeking past the end of a pass is a config_error, never a wrapped index") {
    auto source = numbers(10, "ten");
    source.shard(1, 3);  // records 1, 4, 7
    source.seek(3);      // the end is a valid position
    CHECK(source.next() == nullptr);
    CHECK_THROWS_WITH_AS(
        source.seek(4),
        "vector_source: position 4 is past the end of vector:ten (shard 1 of 3 holds 3 records)",
        crema::config_error);
    CHECK_THROWS_AS(source.seek(std::uint64_t{1} << 63), crema::config_error);
    crema::generator_source<int> generated(
        []() -> crema::generator<int> {
          for (int i = 0; i < 5; ++i) co_yield i;
        },
        "five");
    generated.seek(5);
    CHECK(generated.next() == nullptr);
    CHECK_THROWS_WITH_AS(
        generated.seek(6),
        "generator_source: position 6 is past the end of generator:five (the pass has 5 records)",
        crema::config_error);
  }
}

TEST_SUITE("pipeline faults: misused batches and consumers") {
  TEST_CASE("an empty lease refuses to show a batch, naming why it may be empty") {
    watchdog guard(30s, "empty lease");
    crema::double_buffered_pipeline pipe{numbers(100), identity, {.batch_size = 4}};
    auto consumer = pipe.consumer(0);
    auto lease = consumer.pull();
    REQUIRE(lease);
    auto moved_to = std::move(lease);
    const auto is_empty_lease_error = [](auto&& use) {
      try {
        use();
      } catch (const crema::state_error& e) {
        return std::string(e.what()).find("lease: empty: its batch was given back") == 0;
      }
      return false;
    };
    CHECK(is_empty_lease_error([&] { (void)lease->items(); }));  // moved from
    CHECK(is_empty_lease_error([&] { (void)(*lease).size(); }));
    CHECK(is_empty_lease_error([&] { (void)lease.size(); }));
    CHECK(is_empty_lease_error([&] { (void)lease.sequence(); }));
    moved_to.reset();
    CHECK(is_empty_lease_error([&] { (void)moved_to->items(); }));  // given back
    CHECK(is_empty_lease_error([&] { (void)moved_to.info(); }));
    decltype(lease) never_given;
    CHECK(is_empty_lease_error([&] { (void)never_given.epoch(); }));
  }

  TEST_CASE("a lease given back twice gives its slot back once: every record still comes once") {
    watchdog guard(30s, "double release");
    crema::double_buffered_pipeline pipe{
        numbers(40),
        identity,
        {.batch_size = 4, .prefetch = 2, .mode = pipeline_mode::single_pass, .ordered = true}};
    auto consumer = pipe.consumer(0);
    std::vector<int> seen;
    while (auto batch = consumer.pull()) {
      for (const int record : batch->items()) seen.push_back(record);
      batch.reset();
      batch.reset();  // a second release is nothing
      CHECK(pipe.stats().consumers[0].leased_batches == 0);
    }
    CHECK(seen == first_numbers(40));
    // The pass is over and every lease gone: both slots are free, not one more.
    const auto stats = pipe.stats();
    CHECK(stats.consumers[0].free_slots == 2);
    CHECK(stats.consumers[0].queued_batches == 0);
  }

  TEST_CASE("a batch view used after its lease gave the slot back is refused in debug builds") {
    watchdog guard(30s, "stale batch view");
    crema::double_buffered_pipeline pipe{numbers(100), identity, {.batch_size = 4}};
    auto lease = pipe.consumer(0).pull();
    REQUIRE(lease);
    const auto view = *lease;
    CHECK(view.items().size() == 4);  // while the lease lives
    lease.reset();
    if constexpr (crema::detail::misuse_checks) {
      CHECK_THROWS_WITH_AS((void)view.items(),
                           "batch: batch 0 of consumer 0 was used after its lease gave the slot "
                           "back (it may be refilled by now); keep the lease while its batch is "
                           "used",
                           crema::state_error);
      CHECK_THROWS_AS((void)view[0], crema::state_error);
      CHECK_THROWS_AS((void)view.begin(), crema::state_error);
    } else {
      MESSAGE("misuse checks are off in this build (NDEBUG)");
    }
  }

  TEST_CASE("a transform that writes past its record is refused in debug builds, naming it") {
    watchdog guard(30s, "a write past the record");
    const auto refused = [](auto transform, std::size_t at, const char* batch_name) {
      CAPTURE(at);
      CAPTURE(batch_name);
      crema::double_buffered_pipeline pipe{
          numbers(100),
          transform,
          {.batch_size = 4, .mode = pipeline_mode::single_pass, .ordered = true}};
      auto consumer = pipe.consumer(0);
      try {
        // The records before the one refused come first, as a short batch.
        const auto before = consumer.pull();
        CHECK(before.size() == at);
        (void)consumer.pull();
        FAIL("expected a pipeline_error");
      } catch (const crema::pipeline_error& e) {
        CHECK(
            std::string(e.what()) ==
            fmt::format("pipeline: transform failed on record {} (pass 0) of vector:numbers", at));
        try {
          std::rethrow_if_nested(e);
          FAIL("expected a nested length_error");
        } catch (const crema::length_error& cause) {
          CHECK(std::string(cause.what()) ==
                fmt::format("{}: the transform of record {} wrote past its 6 elements (the "
                            "element after it changed)",
                            batch_name, at));
        }
      }
    };
    if constexpr (!crema::detail::misuse_checks) {
      MESSAGE("misuse checks are off in this build (NDEBUG)");
      return;
    }
    // Fills each record, and record `overrun_at` one element too many, through the pointer, as a
    // hand-written loop with an off-by-one would.
    struct into_device_batch {
      using batch_type = crema::device_batch<float>;
      std::size_t overrun_at;
      std::shared_ptr<crema::emulated_stream> stream =
          std::make_shared<crema::emulated_stream>(crema::emulated_stream::run_inline);
      batch_type make_batch(const crema::batch_context& where) const {
        return batch_type(where.batch_size, {1, 2, 3}, stream);
      }
      void operator()(const int& record, batch_type& batch, const crema::sample_context& s) const {
        float* pixels = batch.record(s.index).data();
        const std::size_t count = s.index == overrun_at ? 7 : 6;
        for (std::size_t k = 0; k < count; ++k) pixels[k] = static_cast<float>(record);
      }
    };
    struct into_host_batch {
      using batch_type = crema::host_batch<float>;
      std::size_t overrun_at;
      batch_type make_batch(const crema::batch_context& where) const {
        return batch_type(where.batch_size, {1, 2, 3});
      }
      void operator()(const int& record, batch_type& batch, const crema::sample_context& s) const {
        float* pixels = batch.record(s.index).data();
        const std::size_t count = s.index == overrun_at ? 7 : 6;
        for (std::size_t k = 0; k < count; ++k) pixels[k] = static_cast<float>(record);
      }
    };
    refused(into_device_batch{2}, 2, "device_batch");  // into the next record
    refused(into_device_batch{3}, 3, "device_batch");  // past the last: into the spare element
    refused(into_host_batch{1}, 1, "host_batch");      // (past the last: AddressSanitizer's)
  }

  TEST_CASE("a consumer pulled from two threads at once is refused in debug builds") {
    watchdog guard(30s, "consumer on two threads");
    crema::test::gate release;
    crema::double_buffered_pipeline pipe{hooked_numbers(100,
                                                        [&release](record_position position) {
                                                          if (position == 0) release.wait();
                                                        }),
                                         identity,
                                         {.batch_size = 4}};
    auto consumer = pipe.consumer(0);
    std::thread first([&] { CHECK(consumer.pull()); });  // waits: record 0 is held up
    while (!pipe.stats().consumers[0].pulling) std::this_thread::sleep_for(1ms);
    if constexpr (crema::detail::misuse_checks) {
      CHECK_THROWS_WITH_AS((void)consumer.try_pull(),
                           "pipeline: consumer 0 is pulled from two threads at once; each consumer "
                           "index is used by one thread at a time (give each thread a consumer of "
                           "its own)",
                           crema::state_error);
    }
    release.open();
    first.join();
    CHECK(consumer.pull());  // one thread after the other is fine
  }
}
