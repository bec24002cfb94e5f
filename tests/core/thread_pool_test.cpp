#include <crema/core/thread_pool.hpp>
#include <crema/pipeline/detail/producer_task.hpp>

#include "common/watchdog.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <coroutine>
#include <latch>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

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

// Suspends the awaiting coroutine and leaves its handle where a poll can find it: nobody posts it.
struct left_for_a_poll {
  std::atomic<void*>& where;
  bool await_ready() const noexcept { return false; }
  void await_suspend(std::coroutine_handle<> coroutine) const noexcept {
    where.store(coroutine.address());
  }
  void await_resume() const noexcept {}
};

crema::detail::producer_task wait_for_a_poll(crema::thread_pool& pool, std::atomic<void*>& where,
                                             std::atomic<std::thread::id>& resumed_on,
                                             std::latch& done) {
  co_await pool.schedule();
  co_await left_for_a_poll{where};
  resumed_on = std::this_thread::get_id();
  done.count_down();
}

crema::detail::producer_task slow_once(crema::thread_pool& pool, std::latch& started,
                                       std::atomic<bool>& finished) {
  co_await pool.schedule();
  started.count_down();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  finished = true;
}

crema::detail::producer_task run_once(crema::thread_pool& pool, std::latch& done) {
  co_await pool.schedule();
  done.count_down();
}

// An idle hook that calls `poll` once armed (the pool may ask it as soon as its threads start).
template <class Poll>
class hook_of final : public crema::idle_hook {
 public:
  explicit hook_of(Poll poll) : poll_(std::move(poll)) {}
  void arm() { armed_.store(true); }
  std::chrono::nanoseconds on_idle(bool first) noexcept override {
    if (!armed_.load()) return std::chrono::nanoseconds::zero();
    return poll_(first);
  }

 private:
  Poll poll_;
  std::atomic<bool> armed_{false};
};

// Waits until `done()`; the test's watchdog ends a wait that would not.
template <class Done>
void wait_until(Done&& done) {
  while (!done()) std::this_thread::sleep_for(std::chrono::microseconds(100));
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

  TEST_CASE("an idle thread polls for work nobody posts, and resumes what its poll posts itself") {
    crema::test::watchdog guard(std::chrono::seconds(20), "thread_pool poll finds work");
    std::atomic<void*> left{nullptr};
    std::atomic<std::thread::id> poller;
    std::atomic<std::thread::id> resumed_on;
    std::atomic<int> polls{0};
    std::latch done(1);
    crema::thread_pool* posts_to = nullptr;
    hook_of hook([&](bool) -> std::chrono::nanoseconds {
      ++polls;
      if (void* found = left.exchange(nullptr)) {
        poller = std::this_thread::get_id();
        posts_to->post(std::coroutine_handle<>::from_address(found));
      }
      return std::chrono::microseconds(200);
    });
    crema::thread_pool pool(2, &hook);
    posts_to = &pool;
    hook.arm();
    wait_for_a_poll(pool, left, resumed_on, done).coroutine.resume();
    done.wait();
    CHECK(polls.load() >= 1);
    CHECK(resumed_on.load() == poller.load());  // the polling thread, not one it woke
    CHECK(resumed_on.load() != std::this_thread::get_id());
  }

  TEST_CASE("one idle thread at a time polls, again and again while its poll asks to") {
    crema::test::watchdog guard(std::chrono::seconds(20), "thread_pool one poller");
    std::atomic<int> inside{0};
    std::atomic<int> most_inside{0};
    std::atomic<int> polls{0};
    std::mutex mutex;
    std::vector<bool> first_calls;  // under mutex
    hook_of hook([&](bool first) -> std::chrono::nanoseconds {
      const int now = ++inside;
      int most = most_inside.load();
      while (now > most && !most_inside.compare_exchange_weak(most, now)) {
      }
      std::this_thread::sleep_for(std::chrono::microseconds(50));  // others may go idle meanwhile
      {
        std::scoped_lock lock(mutex);
        first_calls.push_back(first);
      }
      ++polls;
      --inside;
      return std::chrono::microseconds(100);
    });
    crema::thread_pool pool(4, &hook);
    hook.arm();
    std::latch ran(16);
    for (int i = 0; i < 16; ++i) run_once(pool, ran).coroutine.resume();
    ran.wait();
    wait_until([&] { return polls.load() >= 20; });
    CHECK(most_inside.load() == 1);
    std::scoped_lock lock(mutex);
    CHECK(first_calls.front());  // the first call since the thread went idle says so
    CHECK(std::count(first_calls.begin(), first_calls.end(), false) > 0);  // the timed repeats
  }

  TEST_CASE("a poll that returns zero ends the polling until a thread has run work again") {
    crema::test::watchdog guard(std::chrono::seconds(20), "thread_pool poll ends");
    // The thread may also poll once before it runs anything (if it goes idle only after
    // the hook is armed), so the polls are counted by the runs they follow.
    std::latch ran(1);
    std::latch ran_again(1);
    std::atomic<int> polls_after_run{0};
    std::atomic<int> polls_after_second_run{0};
    std::atomic<int> polls{0};
    std::atomic<int> first_polls{0};
    hook_of hook([&](bool first) -> std::chrono::nanoseconds {
      ++polls;
      if (first) ++first_polls;
      if (ran_again.try_wait()) {
        ++polls_after_second_run;
      } else if (ran.try_wait()) {
        ++polls_after_run;
      }
      return std::chrono::nanoseconds::zero();
    });
    crema::thread_pool pool(1, &hook);
    hook.arm();
    run_once(pool, ran).coroutine.resume();
    ran.wait();
    wait_until([&] { return polls_after_run.load() == 1; });
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(polls_after_run.load() == 1);  // asleep until work comes, not polling
    run_once(pool, ran_again).coroutine.resume();
    ran_again.wait();
    wait_until([&] { return polls_after_second_run.load() == 1; });
    CHECK(polls_after_run.load() == 1);
    CHECK(first_polls.load() == polls.load());  // each poll began an idle spell of its own
  }

  TEST_CASE("a pool signals stop through its stop_token") {
    crema::thread_pool pool(1);
    const auto token = pool.stop_token();
    CHECK_FALSE(token.stop_requested());
    pool.request_stop();
    CHECK(token.stop_requested());
  }

  TEST_CASE("join stops and joins the threads once their work is done, and may be repeated") {
    crema::test::watchdog guard(std::chrono::seconds(20), "thread_pool join");
    std::atomic<bool> finished{false};
    std::latch started(1);
    crema::thread_pool pool(2);
    const auto token = pool.stop_token();
    slow_once(pool, started, finished).coroutine.resume();
    started.wait();
    pool.join();
    CHECK(finished.load());  // what a thread was running ran to its end first
    CHECK(token.stop_requested());
    CHECK(pool.size() == 0);
    pool.join();
    CHECK(pool.size() == 0);
  }

  TEST_CASE("a pool of zero threads is a config_error") {
    CHECK_THROWS_WITH_AS(crema::thread_pool(0), "thread_pool: threads must be at least 1, got 0",
                         crema::config_error);
  }
}
