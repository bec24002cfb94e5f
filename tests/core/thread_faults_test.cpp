// Thread pools when the system refuses threads part-way: a clear error, nothing left running.

#include <crema/core/thread_pool.hpp>

#include "common/thread_limit.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <string>

using namespace std::chrono_literals;

TEST_SUITE("thread_pool faults") {
  TEST_CASE(
      "a pool whose threads cannot all be started throws thread_error naming the counts, "
      "after joining the ones it made") {
    crema::test::check_threads_refused([] { crema::thread_pool pool(1000); }, "thread_pool", 1000,
                                       1);
  }

  TEST_CASE("a pool of more threads than can be counted is a thread_error, not bad_alloc") {
    CHECK_THROWS_WITH_AS(
        crema::thread_pool(std::size_t{1} << 62),
        doctest::Contains(
            fmt::format("thread_pool: {} threads asked for, 0 made", std::size_t{1} << 62).c_str()),
        crema::thread_error);
  }
}
