#include <crema/core/detail/index_stack.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <set>
#include <thread>
#include <vector>

TEST_SUITE("index_stack") {
  TEST_CASE("numbers come out last in, first out, and an empty stack says so") {
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

  TEST_CASE("threads popping and pushing never hold one number twice, and none is lost") {
    constexpr std::uint32_t numbers = 3;
    constexpr int threads = 4;
    constexpr int rounds = 20000;
    crema::detail::index_stack stack(numbers);
    for (std::uint32_t i = 0; i < numbers; ++i) stack.push(i);
    std::vector<std::atomic<bool>> held(numbers);
    std::atomic<int> broken{0};  // a number out of range, or held by two threads at once
    std::atomic<long> taken{0};
    {
      std::vector<std::jthread> workers;
      for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&] {
          for (int round = 0; round < rounds; ++round) {
            std::uint32_t index = 0;
            if (!stack.pop(index)) continue;  // the others hold them all just now
            if (index >= numbers || held[index].exchange(true)) {
              ++broken;
              continue;
            }
            ++taken;
            held[index].store(false);
            stack.push(index);
          }
        });
      }
    }
    CHECK(broken.load() == 0);
    CHECK(taken.load() > 0);
    std::set<std::uint32_t> left;
    for (std::uint32_t index = 0; stack.pop(index);) left.insert(index);
    CHECK(left == std::set<std::uint32_t>{0, 1, 2});
  }
}
