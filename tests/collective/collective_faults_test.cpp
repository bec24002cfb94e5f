// The reducer and its host-thread backend under a user's mistakes and concurrency: a backend
// shared by reducers on several threads, nested jobs, sizes that overflow, overlapping buffers,
// a team that cannot be started.

#include <crema/collective/host/device_tree_reducer.hpp>
#include <crema/collective/p2p_sync.hpp>

#include "collective/reference.hpp"
#include "common/thread_limit.hpp"
#include "common/watchdog.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

std::vector<int> first_ids(int count) {
  std::vector<int> ids(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) ids[static_cast<std::size_t>(i)] = i;
  return ids;
}

}  // namespace

TEST_SUITE("collective faults") {
  TEST_CASE("reducers sharing one host_threads backend from their own threads always sum right") {
    crema::test::watchdog guard(120s, "shared backend");
    auto backend = std::make_shared<crema::host_threads>(3);
    constexpr std::size_t participants = 3;
    constexpr int rounds = 2000;
    // Integer-valued floats: every correct sum is exact, so any mixing of jobs shows.
    const auto run = [&](float base, std::size_t size, std::atomic<int>& wrong) {
      std::vector<std::vector<float>> buffers(participants, std::vector<float>(size));
      crema::device_tree_reducer<float> reducer(
          crema::tree_topology::build(first_ids(participants), [](int, int) { return true; }),
          crema::test::spans_of(buffers), backend, 64);
      for (int round = 0; round < rounds; ++round) {
        for (std::size_t p = 0; p < participants; ++p) {
          for (std::size_t i = 0; i < size; ++i) {
            buffers[p][i] = base + static_cast<float>(round % 7 + p + i % 5);
          }
        }
        reducer.allreduce();
        for (std::size_t p = 0; p < participants; ++p) {
          for (std::size_t i = 0; i < size; ++i) {
            const float expected = 3 * base + static_cast<float>(3 * (round % 7) + 3 + 3 * (i % 5));
            if (buffers[p][i] != expected) {
              ++wrong;
              break;
            }
          }
        }
      }
    };
    std::atomic<int> wrong{0};
    std::thread other([&] { run(1000.0f, 1000, wrong); });
    run(0.0f, 777, wrong);
    other.join();
    CHECK(wrong.load() == 0);
  }

  TEST_CASE("a job started from inside a part of the same backend is a collective_error") {
    crema::test::watchdog guard(20s, "nested job");
    crema::host_threads backend(2);
    std::atomic<int> refused{0};
    backend.parallel([&](std::size_t) {
      try {
        backend.parallel([](std::size_t) {});
      } catch (const crema::collective_error& e) {
        if (std::string(e.what()) ==
            "host_threads: parallel called from inside one of its own parts; it would wait for "
            "itself") {
          ++refused;
        }
      }
    });
    CHECK(refused.load() == 2);
    int ran = 0;
    backend.parallel([&](std::size_t part) {
      if (part == 0) ++ran;
    });
    CHECK(ran == 1);  // the backend still works
  }

  TEST_CASE("a block larger than the buffers is the whole buffer, with the same sums") {
    crema::test::watchdog guard(20s, "huge block");
    const auto tree = crema::tree_topology::build(first_ids(4), [](int, int) { return true; });
    const auto inputs = crema::test::make_inputs(4, 1001, 7);
    for (const std::size_t block :
         {std::size_t{1} << 40, std::size_t{1} << 63, std::numeric_limits<std::size_t>::max()}) {
      CAPTURE(block);
      auto buffers = inputs;
      crema::device_tree_reducer<float> reducer(tree, crema::test::spans_of(buffers),
                                                std::make_shared<crema::host_threads>(2), block);
      reducer.allreduce();
      for (std::size_t i = 0; i < 1001; ++i) {
        const float expected = crema::test::tree_order_sum(tree, inputs, tree.root(), i);
        for (const auto& buffer : buffers) REQUIRE(buffer[i] == expected);
      }
    }
  }

  TEST_CASE("bucket sizes whose sum overflows are refused, naming the bucket") {
    const auto tree = crema::tree_topology::flat(first_ids(2));
    std::vector<std::vector<float>> parameters(2, std::vector<float>(100));
    std::vector<std::vector<float>> gradients(2, std::vector<float>(100));
    const auto make = [&](std::vector<std::size_t> sizes) {
      crema::host_p2p_sync<float> sync(tree, crema::test::spans_of(parameters),
                                       crema::test::spans_of(gradients),
                                       {.bucket_sizes = std::move(sizes)});
    };
    constexpr std::size_t max = std::numeric_limits<std::size_t>::max();
    const std::string first_too_big = fmt::format(
        "p2p_sync: bucket_sizes[0] = {} takes the buckets past the 100 gradient elements", max);
    CHECK_THROWS_WITH_AS(make({max, 101}), first_too_big.c_str(), crema::collective_error);
    CHECK_THROWS_WITH_AS(make({50, max}), doctest::Contains("bucket_sizes[1] = "),
                         crema::collective_error);
    CHECK_THROWS_WITH_AS(make({60, 30, 20}),
                         "p2p_sync: bucket_sizes[2] = 20 takes the buckets past the 100 gradient "
                         "elements",
                         crema::collective_error);
    make({40, 0, 60});  // an empty bucket (a layer without parameters) is harmless
  }

  TEST_CASE("two participants on overlapping buffers are refused, naming both") {
    std::vector<float> storage(300);
    const std::span<float> whole(storage);
    const auto tree = crema::tree_topology::flat(first_ids(3));
    CHECK_THROWS_WITH_AS(
        (crema::device_tree_reducer<float>(
            tree, {whole.subspan(0, 100), whole.subspan(150, 100), whole.subspan(50, 100)})),
        "device_tree_reducer: the buffers of participants 0 and 2 overlap",
        crema::collective_error);
    CHECK_THROWS_WITH_AS(
        (crema::device_tree_reducer<float>(
            tree, {whole.subspan(0, 100), whole.subspan(0, 100), whole.subspan(200, 100)})),
        "device_tree_reducer: the buffers of participants 0 and 1 overlap",
        crema::collective_error);
    // Adjacent is fine.
    crema::device_tree_reducer<float> adjacent(
        tree, {whole.subspan(0, 100), whole.subspan(100, 100), whole.subspan(200, 100)});
    CHECK(adjacent.size() == 100);
  }

  TEST_CASE(
      "a host_threads team that cannot all be started throws thread_error naming the "
      "counts") {
    // The caller counts as one of the team's threads: at least it and one more are made.
    crema::test::check_threads_refused([] { crema::host_threads team(1000); }, "host_threads", 1000,
                                       2);
  }

  TEST_CASE(
      "a hook timeout of milliseconds::max() waits for ever, and a timeout of zero is "
      "refused") {
    crema::test::watchdog guard(20s, "p2p_sync timeouts");
    const auto tree = crema::tree_topology::flat(first_ids(2));
    std::vector<std::vector<float>> parameters(2, std::vector<float>(4, 1.0f));
    std::vector<std::vector<float>> gradients(2, std::vector<float>(4));
    CHECK_THROWS_WITH_AS(
        crema::host_p2p_sync<float>(tree, crema::test::spans_of(parameters),
                                    crema::test::spans_of(gradients), {.timeout = 0ms}),
        "p2p_sync: timeout must be positive (milliseconds::max() waits for ever), got 0 ms",
        crema::collective_error);
    crema::host_p2p_sync<float> sync(tree, crema::test::spans_of(parameters),
                                     crema::test::spans_of(gradients),
                                     {.timeout = std::chrono::milliseconds::max()});
    parameters[0].assign(4, 5.0f);
    std::thread late_root([&] {
      std::this_thread::sleep_for(100ms);  // the other waits; it must not time out at once
      sync.on_start(0);
      sync.on_gradients_ready(0);
    });
    sync.on_start(1);
    sync.on_gradients_ready(1);
    late_root.join();
    CHECK(parameters[1] == std::vector<float>(4, 5.0f));
  }

  TEST_CASE("a range reduction outside the buffers, or for no participant, is refused") {
    const auto tree = crema::tree_topology::flat(first_ids(2));
    std::vector<std::vector<float>> buffers(2, std::vector<float>(10));
    crema::device_tree_reducer<float> reducer(tree, crema::test::spans_of(buffers));
    CHECK_THROWS_WITH_AS(
        reducer.reduce_range(0, 5, 11, crema::reduction::sum),
        "device_tree_reducer::reduce_range: elements [5, 11) are not within the 10 of each buffer",
        crema::collective_error);
    CHECK_THROWS_AS(reducer.reduce_range(0, 6, 5, crema::reduction::sum), crema::collective_error);
    CHECK_THROWS_WITH_AS(reducer.reduce_range(2, 0, 5, crema::reduction::sum),
                         doctest::Contains("participant 2 is outside a tree of 2"),
                         crema::collective_error);
  }

  TEST_CASE("a host_threads team of more threads than can be counted is a thread_error") {
    CHECK_THROWS_AS(crema::host_threads(std::size_t{1} << 62), crema::thread_error);
  }
}
