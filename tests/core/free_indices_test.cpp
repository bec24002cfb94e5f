#include <crema/core/detail/index_queue.hpp>
#include <crema/core/detail/index_stack.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

// The two lock-free sets of slot numbers a slot_pool keeps its free slots in: a stack (the
// number released last comes out first) and a queue (the number released first comes out first).
TEST_SUITE("free slot numbers") {
  TEST_CASE("index_stack: numbers come out last in, first out, and an empty stack says so") {
    crema::detail::index_stack stack(4);
    std::uint32_t index = 99;
    CHECK_FALSE(stack.pop(index));
    CHECK(index == 99);
    for (std::uint32_t i : {2u, 0u, 3u}) stack.push(i);
    for (std::uint32_t expected : {3u, 0u, 2u}) {
      REQUIRE(stack.pop(index));
      CHECK(index == expected);
    }
    CHECK_FALSE(stack.pop(index));
    stack.push(1);
    REQUIRE(stack.pop(index));
    CHECK(index == 1);
  }

  TEST_CASE("index_queue: numbers come out first in, first out, lap after lap of its ring") {
    for (const std::uint32_t capacity : {1u, 3u, 4u, 5u}) {
      CAPTURE(capacity);
      crema::detail::index_queue queue(capacity);
      std::uint32_t index = 99;
      CHECK_FALSE(queue.pop(index));
      CHECK(index == 99);
      // All numbers in, then round and round: each lap moves the ring's start.
      for (std::uint32_t i = capacity; i-- > 0;) queue.push(i);
      std::vector<std::uint32_t> order;
      for (std::uint32_t i = capacity; i-- > 0;) order.push_back(i);
      for (int lap = 0; lap < 10; ++lap) {
        for (const std::uint32_t expected : order) {
          REQUIRE(queue.pop(index));
          CHECK(index == expected);
          queue.push(index);
        }
      }
      // Half out, back in reversed: they come out after the rest, in the new order.
      std::vector<std::uint32_t> taken;
      for (std::uint32_t i = 0; i < (capacity + 1) / 2; ++i) {
        REQUIRE(queue.pop(index));
        taken.push_back(index);
      }
      for (auto it = taken.rbegin(); it != taken.rend(); ++it) queue.push(*it);
      std::vector<std::uint32_t> expected(order.begin() + static_cast<long>(taken.size()),
                                          order.end());
      expected.insert(expected.end(), taken.rbegin(), taken.rend());
      for (const std::uint32_t want : expected) {
        REQUIRE(queue.pop(index));
        CHECK(index == want);
      }
      CHECK_FALSE(queue.pop(index));
    }
  }

  TEST_CASE_TEMPLATE("threads popping and pushing never hold one number twice, and none is lost",
                     Set, crema::detail::index_stack, crema::detail::index_queue) {
    constexpr std::uint32_t numbers = 3;
    constexpr int threads = 4;
    constexpr int rounds = 20000;
    Set set(numbers);
    for (std::uint32_t i = 0; i < numbers; ++i) set.push(i);
    std::vector<std::atomic<bool>> held(numbers);
    std::atomic<int> broken{0};  // a number out of range, or held by two threads at once
    std::atomic<long> taken{0};
    {
      std::vector<std::jthread> workers;
      for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&] {
          for (int round = 0; round < rounds; ++round) {
            std::uint32_t index = 0;
            if (!set.pop(index)) continue;  // the others hold them all just now
            if (index >= numbers || held[index].exchange(true)) {
              ++broken;
              continue;
            }
            ++taken;
            held[index].store(false);
            set.push(index);
          }
        });
      }
    }
    CHECK(broken.load() == 0);
    CHECK(taken.load() > 0);
    std::set<std::uint32_t> left;
    for (std::uint32_t index = 0; set.pop(index);) left.insert(index);
    CHECK(left == std::set<std::uint32_t>{0, 1, 2});
  }
}
