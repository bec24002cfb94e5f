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
    const auto report = crema::test::run_with_thread_limit(8, 20s, [] {
      crema::test::settle_thread_count();
      const std::size_t before = crema::test::thread_count();
      try {
        crema::thread_pool pool(1000);
        return std::string("constructed");
      } catch (const crema::thread_error& e) {
        return fmt::format("{}|{}|{}", e.code(), e.what(),
                           crema::test::thread_count() == before ? "joined" : "leaked");
      }
    });
    if (report.skipped) {
      std::printf("crema-test-skip: %s\n", report.text.c_str());
      return;
    }
    CHECK_FALSE(report.hung);
    CHECK(report.exit_code == 0);
    CAPTURE(report.text);
    unsigned made = 0;
    char reason[128] = {};
    REQUIRE(std::sscanf(report.text.c_str(),
                        "11|thread_pool: 1000 threads asked for, %u made: %127[^|]", &made,
                        reason) == 2);
    CHECK(made > 0);
    CHECK(made < 1000);
    CHECK(std::string(reason) == "Resource temporarily unavailable");
    CHECK(report.text.substr(report.text.size() - 7) == "|joined");
  }

  TEST_CASE("a pool of more threads than can be counted is a thread_error, not bad_alloc") {
    CHECK_THROWS_WITH_AS(
        crema::thread_pool(std::size_t{1} << 62),
        doctest::Contains(
            fmt::format("thread_pool: {} threads asked for, 0 made", std::size_t{1} << 62).c_str()),
        crema::thread_error);
  }
}
