#include <crema/core/thread_pool.hpp>
#include <crema/pipeline/detail/producer_task.hpp>

#include "common/watchdog.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <latch>
#include <mutex>
#include <set>
#include <thread>

namespace {

crema::detail::producer_task record_thread(crema::thread_pool& pool, std::mutex& mutex,
                                           std::set<std::thread::id>& threads, std::latch& done) {
  co_await pool.schedule();
  {
    std::scoped_lock lock(mutex);
    threads.insert(std::this_thread::get_id());
  }
  done.count_down();
}

}  // namespace

TEST_SUITE("thread_pool") {
  TEST_CASE("coroutines scheduled on a pool run on its threads only") {
    crema::test::watchdog guard(std::chrono::seconds(20), "thread_pool schedule");
    crema::thread_pool pool(2);
    CHECK(pool.size() == 2);
    std::mutex mutex;
    std::set<std::thread::id> threads;
    std::latch done(64);
    for (int i = 0; i < 64; ++i) record_thread(pool, mutex, threads, done).coroutine.resume();
    done.wait();
    std::scoped_lock lock(mutex);
    CHECK(threads.size() >= 1);
    CHECK(threads.size() <= 2);
    CHECK(threads.count(std::this_thread::get_id()) == 0);
  }

  TEST_CASE("a pool signals stop through its stop_token") {
    crema::thread_pool pool(1);
    const auto token = pool.stop_token();
    CHECK_FALSE(token.stop_requested());
    pool.request_stop();
    CHECK(token.stop_requested());
  }

  TEST_CASE("a pool of zero threads is a config_error") {
    CHECK_THROWS_WITH_AS(crema::thread_pool(0), "thread_pool: threads must be at least 1, got 0",
                         crema::config_error);
  }
}
