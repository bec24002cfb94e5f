#include <crema/collective/p2p_sync.hpp>

#include "collective/reference.hpp"
#include "common/watchdog.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <mutex>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#if defined(__SANITIZE_THREAD__)
#define CREMA_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CREMA_UNDER_TSAN 1
#endif
#endif

namespace {

using namespace std::chrono_literals;

std::vector<int> first_ids(std::size_t count) {
  std::vector<int> ids(count);
  std::iota(ids.begin(), ids.end(), 0);
  return ids;
}

// Deterministic "gradients" of participant p at a step, from its parameters.
float gradient(float parameter, std::size_t p, std::size_t step, std::size_t i) {
  return parameter * 0.01f + static_cast<float>((p * 31 + step * 7 + i) % 17) - 8.0f;
}

// Runs `steps` training steps of `participants` threads through p2p_sync, each thread marking its
// buckets from last to first as a backward pass would, the root applying SGD; returns the root's
// parameters. The same loop done serially gives the expected bits.
std::vector<float> train(std::size_t participants, std::size_t steps, std::size_t size,
                         std::vector<std::size_t> bucket_sizes, bool threaded) {
  const auto tree =
      crema::tree_topology::build(first_ids(participants), [](int, int) { return true; });
  std::vector<std::vector<float>> parameters(participants, std::vector<float>(size, 1.0f));
  std::vector<std::vector<float>> gradients(participants, std::vector<float>(size, 0.0f));
  constexpr float learning_rate = 0.1f;

  if (!threaded) {  // the serial reference
    for (std::size_t step = 1; step <= steps; ++step) {
      for (std::size_t p = 0; p < participants; ++p) {
        parameters[p] = parameters[tree.root()];
        for (std::size_t i = 0; i < size; ++i)
          gradients[p][i] = gradient(parameters[p][i], p, step, i);
      }
      const float scale = 1.0f / static_cast<float>(participants);
      std::vector<float> average(size);
      for (std::size_t i = 0; i < size; ++i) {
        average[i] = crema::test::tree_order_sum(tree, gradients, tree.root(), i) * scale;
      }
      for (std::size_t i = 0; i < size; ++i)
        parameters[tree.root()][i] -= learning_rate * average[i];
    }
    return parameters[tree.root()];
  }

  crema::host_p2p_sync<float> sync(tree, crema::test::spans_of(parameters),
                                   crema::test::spans_of(gradients),
                                   {.bucket_sizes = bucket_sizes, .timeout = 30s});
  std::vector<std::thread> threads;
  for (std::size_t p = 0; p < participants; ++p) {
    threads.emplace_back([&, p] {
      std::vector<std::size_t> begin{0};
      for (const std::size_t b :
           bucket_sizes.empty() ? std::vector<std::size_t>{size} : bucket_sizes) {
        begin.push_back(begin.back() + b);
      }
      for (std::size_t step = 1; step <= steps; ++step) {
        sync.on_start(p);
        for (std::size_t b = begin.size() - 1; b-- > 0;) {  // backward: last bucket first
          for (std::size_t i = begin[b]; i < begin[b + 1]; ++i) {
            gradients[p][i] = gradient(parameters[p][i], p, step, i);
          }
          if (!bucket_sizes.empty()) sync.on_bucket_ready(p, b);
        }
        sync.on_gradients_ready(p);
        if (p == tree.root()) {
          for (std::size_t i = 0; i < size; ++i)
            parameters[p][i] -= learning_rate * gradients[p][i];
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  return parameters[tree.root()];
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  return a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_SUITE("p2p_sync") {
  TEST_CASE("four participant threads run 1000 steps and match the serial loop bit for bit") {
    crema::test::watchdog guard(120s, "p2p_sync 4 x 1000 steps");
    const auto expected = train(4, 1000, 257, {}, false);
    CHECK(same_bits(train(4, 1000, 257, {}, true), expected));
    CHECK(same_bits(train(4, 1000, 257, {100, 57, 100}, true), expected));  // bucketed
  }

#ifndef CREMA_UNDER_TSAN
  TEST_CASE("sixteen participant threads run 1000 steps and match the serial loop bit for bit") {
    crema::test::watchdog guard(300s, "p2p_sync 16 x 1000 steps");
    const auto expected = train(16, 1000, 129, {}, false);
    CHECK(same_bits(train(16, 1000, 129, crema::buckets_of<float>(129, 128), true), expected));
  }
#endif

  TEST_CASE("bucketed and unbucketed hooks give the collective's bits for 1 to 16 participants") {
    for (std::size_t participants = 1; participants <= 16; participants += 5) {
      for (const std::size_t size :
           {std::size_t{0}, std::size_t{1}, std::size_t{1009}, (std::size_t{1} << 20) + 3}) {
        CAPTURE(participants);
        CAPTURE(size);
        const auto tree =
            crema::tree_topology::build(first_ids(participants), [](int, int) { return true; });
        const auto inputs = crema::test::make_inputs(participants, size, 13);
        auto expected = inputs;
        crema::device_tree_reducer<float>(tree, crema::test::spans_of(expected), {}, 1000)
            .reduce(tree.root(), crema::reduction::average);
        for (const std::size_t bucket_bytes : {std::size_t{0}, std::size_t{4096}}) {
          auto gradients = inputs;
          std::vector<std::vector<float>> parameters(participants, std::vector<float>(size));
          crema::host_p2p_sync<float> sync(
              tree, crema::test::spans_of(parameters), crema::test::spans_of(gradients),
              {.bucket_sizes = bucket_bytes == 0 ? std::vector<std::size_t>{}
                                                 : crema::buckets_of<float>(size, bucket_bytes)});
          sync.on_start(tree.root());
          for (std::size_t p = 0; p < participants; ++p) {
            if (p != tree.root()) sync.on_start(p);
          }
          for (std::size_t b = sync.buckets(); b-- > 0;) {  // every participant, last bucket first
            for (std::size_t p = 0; p < participants; ++p) sync.on_bucket_ready(p, b);
          }
          for (std::size_t p = 0; p < participants; ++p) {
            if (p != tree.root()) sync.on_gradients_ready(p);
          }
          sync.on_gradients_ready(tree.root());
          CHECK(same_bits(gradients[tree.root()], expected[tree.root()]));
        }
      }
    }
  }

  TEST_CASE("a hook called twice in a step is a collective_error naming participant and step") {
    const auto tree = crema::tree_topology::flat(first_ids(2));
    std::vector<std::vector<float>> parameters(2, std::vector<float>(8));
    std::vector<std::vector<float>> gradients(2, std::vector<float>(8));
    crema::host_p2p_sync<float> sync(tree, crema::test::spans_of(parameters),
                                     crema::test::spans_of(gradients), {.bucket_sizes = {4, 4}});
    CHECK_THROWS_WITH_AS(sync.on_gradients_ready(1),
                         "p2p_sync: participant 1 called on_gradients_ready before on_start",
                         crema::collective_error);
    sync.on_start(0);
    CHECK_THROWS_WITH_AS(sync.on_start(0),
                         "p2p_sync: participant 0 called on_start twice in step 1",
                         crema::collective_error);
    sync.on_start(1);
    sync.on_bucket_ready(1, 0);
    CHECK_THROWS_WITH_AS(sync.on_bucket_ready(1, 0),
                         "p2p_sync: participant 1 marked bucket 0 twice in step 1",
                         crema::collective_error);
    CHECK_THROWS_AS(sync.on_bucket_ready(1, 2), crema::collective_error);
    sync.on_gradients_ready(1);
    CHECK_THROWS_WITH_AS(sync.on_gradients_ready(1),
                         "p2p_sync: participant 1 called on_gradients_ready twice in step 1",
                         crema::collective_error);
    sync.on_gradients_ready(0);
  }

  TEST_CASE("buckets that do not cover the gradients are a collective_error") {
    const auto tree = crema::tree_topology::flat(first_ids(2));
    std::vector<std::vector<float>> parameters(2, std::vector<float>(8));
    std::vector<std::vector<float>> gradients(2, std::vector<float>(8));
    CHECK_THROWS_WITH_AS(
        crema::host_p2p_sync<float>(tree, crema::test::spans_of(parameters),
                                    crema::test::spans_of(gradients), {.bucket_sizes = {4, 3}}),
        "p2p_sync: bucket_sizes cover 7 elements, the gradients have 8", crema::collective_error);
  }

  TEST_CASE("a participant that fails makes the others fail instead of hang") {
    crema::test::watchdog guard(30s, "p2p_sync abort");
    const auto tree = crema::tree_topology::flat(first_ids(3));
    std::vector<std::vector<float>> parameters(3, std::vector<float>(8));
    std::vector<std::vector<float>> gradients(3, std::vector<float>(8));
    crema::host_p2p_sync<float> sync(tree, crema::test::spans_of(parameters),
                                     crema::test::spans_of(gradients));
    std::atomic<int> failures{0};
    std::vector<std::thread> threads;
    for (std::size_t p = 0; p < 3; ++p) {
      threads.emplace_back([&, p] {
        try {
          sync.on_start(p);
          if (p == 2) throw std::runtime_error("out of memory in backward");
          sync.on_gradients_ready(p);
          sync.on_start(p);  // the others wait here for a root that waits for participant 2
        } catch (const std::runtime_error& e) {
          if (p == 2) {
            sync.abort(p, e.what());
          } else {
            CHECK(std::string(e.what()) ==
                  "p2p_sync: participant 2 failed: out of memory in backward");
            ++failures;
          }
        }
      });
    }
    for (auto& thread : threads) thread.join();
    CHECK(failures == 2);
  }

  TEST_CASE("a participant that never comes makes the root time out with its name") {
    crema::test::watchdog guard(30s, "p2p_sync timeout");
    const auto tree = crema::tree_topology::flat(first_ids(3));
    std::vector<std::vector<float>> parameters(3, std::vector<float>(8));
    std::vector<std::vector<float>> gradients(3, std::vector<float>(8));
    crema::host_p2p_sync<float> sync(tree, crema::test::spans_of(parameters),
                                     crema::test::spans_of(gradients), {.timeout = 200ms});
    sync.on_start(0);
    sync.on_start(1);
    sync.on_gradients_ready(1);
    CHECK_THROWS_WITH_AS(sync.on_gradients_ready(0),
                         "p2p_sync: timed out after 200 ms: the root waited for the gradients of "
                         "step 1 from participants 2",
                         crema::collective_error);
  }
}

namespace {

// A tree_collective that does nothing but note what it is asked, to pin down the calls p2p_sync
// makes on the collectives it is given.
class recording_collective {
 public:
  using value_type = float;
  recording_collective(std::size_t participants, std::size_t size)
      : participants_(participants), size_(size) {}

  [[nodiscard]] std::size_t participants() const { return participants_; }
  [[nodiscard]] std::size_t size() const { return size_; }
  void broadcast(std::size_t root) { note(fmt::format("broadcast {}", root)); }
  void reduce(std::size_t root, crema::reduction op) {
    note(fmt::format("reduce {} {}", root, name(op)));
  }
  void allreduce(crema::reduction op) { note(fmt::format("allreduce {}", name(op))); }
  void reduce_range(std::size_t root, std::size_t begin, std::size_t end, crema::reduction op) {
    note(fmt::format("reduce_range {} [{}, {}) {}", root, begin, end, name(op)));
  }

  [[nodiscard]] std::vector<std::string> calls() const {
    std::scoped_lock lock(mutex_);
    return calls_;
  }

 private:
  static const char* name(crema::reduction op) {
    return op == crema::reduction::average ? "average" : "sum";
  }
  void note(std::string call) {
    std::scoped_lock lock(mutex_);
    calls_.push_back(std::move(call));
  }
  std::size_t participants_;
  std::size_t size_;
  mutable std::mutex mutex_;
  std::vector<std::string> calls_;
};
static_assert(crema::tree_collective<recording_collective>);

}  // namespace

TEST_SUITE("p2p_sync over any collective") {
  TEST_CASE("each step broadcasts once from the root and reduces each bucket once, nothing else") {
    crema::test::watchdog guard(30s, "p2p_sync calls");
    recording_collective parameters(3, 10);
    recording_collective gradients(3, 10);
    crema::p2p_sync<recording_collective> sync(parameters, gradients, 1, {.bucket_sizes = {4, 6}});
    CHECK(sync.root() == 1);
    constexpr int steps = 3;
    std::vector<std::jthread> participants;
    for (std::size_t p = 0; p < 3; ++p) {
      participants.emplace_back([&, p] {
        for (int step = 0; step < steps; ++step) {
          sync.on_start(p);
          if (p != 2) sync.on_bucket_ready(p, 1);  // the last layer's gradients first
          sync.on_gradients_ready(p);
        }
      });
    }
    participants.clear();
    CHECK(parameters.calls() == std::vector<std::string>(steps, "broadcast 1"));
    auto reduced = gradients.calls();
    REQUIRE(reduced.size() == 2 * steps);
    std::sort(reduced.begin(), reduced.end());
    for (int step = 0; step < steps; ++step) {
      CHECK(reduced[static_cast<std::size_t>(step)] == "reduce_range 1 [0, 4) average");
      CHECK(reduced[static_cast<std::size_t>(steps + step)] == "reduce_range 1 [4, 10) average");
    }
  }

  TEST_CASE("collectives that disagree on the participants, or a root outside them, are refused") {
    recording_collective three(3, 10);
    recording_collective two(2, 10);
    CHECK_THROWS_WITH_AS(crema::p2p_sync<recording_collective>(three, two, 0),
                         "p2p_sync: the parameters have 3 participants, the gradients 2",
                         crema::collective_error);
    CHECK_THROWS_WITH_AS(crema::p2p_sync<recording_collective>(three, three, 3),
                         "p2p_sync::root: participant 3 is outside a tree of 3",
                         crema::collective_error);
  }
}

namespace {

// A recording collective whose ranges must be reduced in one order everywhere (as across ranks),
// and whose range reductions take a while.
class slow_ordered_collective : public recording_collective {
 public:
  static constexpr bool ranges_in_order = true;
  using recording_collective::recording_collective;
  void reduce_range(std::size_t root, std::size_t begin, std::size_t end, crema::reduction op) {
    std::this_thread::sleep_for(150ms);
    recording_collective::reduce_range(root, begin, end, op);
  }
};

}  // namespace

TEST_SUITE("p2p_sync over any collective") {
  TEST_CASE(
      "for models that reduce ranges in one order, buckets travel in index order while the "
      "participants go on") {
    crema::test::watchdog guard(30s, "ordered buckets");
    slow_ordered_collective parameters(2, 9);
    slow_ordered_collective gradients(2, 9);
    crema::p2p_sync<slow_ordered_collective> sync(parameters, gradients, 0,
                                                  {.bucket_sizes = {3, 3, 3}});
    std::atomic<bool> marked_at_once{true};
    std::vector<std::jthread> participants;
    for (std::size_t p = 0; p < 2; ++p) {
      participants.emplace_back([&, p] {
        for (int step = 0; step < 2; ++step) {
          sync.on_start(p);
          for (std::size_t b : {2U, 0U, 1U}) {  // the last bucket first
            const auto asked = std::chrono::steady_clock::now();
            sync.on_bucket_ready(p, b);
            if (std::chrono::steady_clock::now() - asked > 100ms) marked_at_once = false;
          }
          sync.on_gradients_ready(p);
        }
      });
    }
    participants.clear();
    CHECK(marked_at_once.load());  // no participant waited for a reduction
    const std::vector<std::string> one_step{"reduce_range 0 [0, 3) average",
                                            "reduce_range 0 [3, 6) average",
                                            "reduce_range 0 [6, 9) average"};
    std::vector<std::string> expected = one_step;
    expected.insert(expected.end(), one_step.begin(), one_step.end());
    CHECK(gradients.calls() == expected);  // in index order, whatever the order of marking
  }
}
