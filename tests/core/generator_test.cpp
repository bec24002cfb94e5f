#include <crema/core/generator.hpp>

#include "common/counted.hpp"

#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace {

crema::generator<int> count_to(int last, int& started) {
  ++started;
  for (int i = 1; i <= last; ++i) co_yield i;
}

crema::generator<std::string> words() {
  std::string word = "a";
  co_yield word;  // an lvalue: the consumer may change it in place
  co_yield word + "b";
}

crema::generator<int> fails_after(int good) {
  for (int i = 0; i < good; ++i) co_yield i;
  throw std::runtime_error("source broke");
}

crema::generator<int> holds_counted(bool& finished) {
  crema::test::counted held;
  co_yield 1;
  co_yield 2;
  finished = true;
}

}  // namespace

TEST_SUITE("generator") {
  TEST_CASE("a generator is lazy and yields its values in order") {
    int started = 0;
    auto numbers = count_to(5, started);
    CHECK(started == 0);
    std::vector<int> seen;
    for (int value : numbers) seen.push_back(value);
    CHECK(started == 1);
    CHECK(seen == std::vector<int>{1, 2, 3, 4, 5});
  }

  TEST_CASE("a yielded lvalue is referred to, not copied") {
    std::vector<std::string> seen;
    for (std::string& word : words()) {
      seen.push_back(word);
      word += "!";  // the coroutine's own variable
    }
    CHECK(seen == std::vector<std::string>{"a", "a!b"});
  }

  TEST_CASE("an exception in the coroutine reaches the consumer where it advances") {
    auto numbers = fails_after(2);
    auto it = numbers.begin();
    CHECK(*it == 0);
    ++it;
    CHECK(*it == 1);
    CHECK_THROWS_WITH_AS(++it, "source broke", std::runtime_error);
    CHECK_THROWS_WITH_AS((void)fails_after(0).begin(), "source broke", std::runtime_error);
  }

  TEST_CASE("a generator is move-only and destroying it early frees the coroutine's locals") {
    static_assert(!std::is_copy_constructible_v<crema::generator<int>>);
    static_assert(std::is_nothrow_move_constructible_v<crema::generator<int>>);
    crema::test::counted::reset();
    bool finished = false;
    {
      auto numbers = holds_counted(finished);
      auto moved = std::move(numbers);
      auto it = moved.begin();
      CHECK(*it == 1);
      CHECK(crema::test::counted::constructed == 1);
    }
    CHECK_FALSE(finished);
    CHECK(crema::test::counted::destroyed == 1);
  }

  TEST_CASE("an empty generator ends at once") {
    crema::generator<int> nothing;
    CHECK(nothing.begin() == nothing.end());
  }
}
