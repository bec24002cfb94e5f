#pragma once

#include <crema/core/detail/concurrentqueue.hpp>
#include <crema/core/detail/start_threads.hpp>
#include <crema/core/error.hpp>

#include <atomic>
#include <chrono>
#include <coroutine>
#include <cstddef>
#include <functional>
#include <stop_token>
#include <thread>
#include <vector>

#if defined(__linux__)
#include <sys/prctl.h>
#endif

namespace crema {

/// @brief A fixed set of `std::jthread`s that resume coroutines: the executor crema's producers
/// run on.
///
/// A coroutine moves onto the pool with `co_await pool.schedule()`; anything holding a suspended
/// coroutine (a slot pool waking a producer, say) hands it back with `post()`. So M coroutines
/// share K threads, and one that waits for something is suspended, not blocking a thread.
///
/// An idle thread sleeps until work is posted; with `poll_when_idle`, one idle thread at a time
/// instead wakes now and then by itself to look for work that nobody posts (slots a consumer
/// gave back without paying for a wake-up, say).
///
/// `post` and `schedule` are thread-safe and lock-free (the queue may allocate a block now and
/// then). `request_stop()` signals the pool's `stop_token()` to the coroutines; the destructor
/// stops and joins the threads. A coroutine still queued then may never run (the queue is not
/// FIFO across posting threads), so whoever owns coroutines on the pool makes sure they have
/// finished before the pool goes, as `double_buffered_pipeline` does.
class thread_pool {
 public:
  /// @param threads how many threads to start
  /// @throws crema::config_error if `threads` is 0
  /// @throws crema::thread_error naming how many threads were asked for and made, if the system
  ///         refuses one (the ones made are stopped and joined first)
  explicit thread_pool(std::size_t threads) {
    if (threads == 0) detail::fail<config_error>("thread_pool: threads must be at least 1, got 0");
    detail::start_threads(
        "thread_pool", threads, workers_, [this] { return std::jthread([this] { run(); }); },
        [this] { wake_workers(); });
  }
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  /// @brief Stops and joins the threads.
  ~thread_pool() {
    stop_.request_stop();
    wake_workers();
    workers_.clear();  // joins
  }

  /// @brief Queues `coroutine` to be resumed on one of the pool's threads.
  /// @throws crema::allocation_error if the queue cannot grow (a coroutine is never dropped
  ///         silently)
  void post(std::coroutine_handle<> coroutine) {
    // The polling thread keeps the first coroutine its poll posts and resumes it itself: no
    // other thread is woken for it.
    if (std::coroutine_handle<>*& keep = kept_by_poll(); keep != nullptr && runs_this_thread()) {
      *keep = coroutine;
      keep = nullptr;
      return;
    }
    if (!work_.enqueue(coroutine)) [[unlikely]] {
      throw allocation_error(sizeof(coroutine), "host", "thread_pool: the work queue cannot grow");
    }
  }

  /// @brief An awaitable that suspends the awaiting coroutine and resumes it on the pool.
  [[nodiscard]] auto schedule() noexcept {
    struct awaiter {
      thread_pool* pool;
      bool await_ready() const noexcept { return false; }
      void await_suspend(std::coroutine_handle<> coroutine) const { pool->post(coroutine); }
      void await_resume() const noexcept {}
    };
    return awaiter{this};
  }

  /// @brief Has an idle thread call `poll` rather than sleep until work is posted: one idle
  /// thread at a time calls it (with `true` the first time since it went idle, `false` after),
  /// and sleeps for as long as it returns before calling it again, or, when it returns zero,
  /// until work is posted (the next thread to go idle after work polls again). The first coroutine
  /// `poll` posts is resumed by the polling thread itself; others go to the queue as usual. `poll`
  /// must not throw. A polling thread asks the kernel for timers accurate to about a microsecond
  /// (Linux's timer slack; 50 µs by default).
  ///
  /// Call once, before posting the work whose waits it is for; threads idle since before the
  /// call start polling once they have run something.
  void poll_when_idle(std::function<std::chrono::nanoseconds(bool)> poll) {
    idle_poll_ = std::move(poll);
    polls_.store(true, std::memory_order_release);
  }

  /// @brief Asks the coroutines on the pool to finish; they see it through `stop_token()`.
  void request_stop() noexcept { stop_.request_stop(); }
  /// @return the token that `request_stop()` and the destructor signal
  [[nodiscard]] std::stop_token stop_token() const noexcept { return stop_.get_token(); }
  /// @return the number of threads
  [[nodiscard]] std::size_t size() const noexcept { return workers_.size(); }
  /// @return whether the calling thread is one of this pool's; never blocks
  [[nodiscard]] bool runs_this_thread() const noexcept { return current_pool() == this; }

 private:
  static const thread_pool*& current_pool() noexcept {
    thread_local const thread_pool* pool = nullptr;
    return pool;
  }
  // Where a polling thread keeps the first coroutine its poll posts; null when not polling.
  static std::coroutine_handle<>*& kept_by_poll() noexcept {
    thread_local std::coroutine_handle<>* keep = nullptr;
    return keep;
  }

  // One empty handle per thread: each thread that takes one returns.
  void wake_workers() {
    for (std::size_t i = 0; i < workers_.size(); ++i) work_.enqueue(std::coroutine_handle<>{});
  }

  void run() {
    current_pool() = this;
    for (;;) {
      std::coroutine_handle<> coroutine;
      if (!work_.try_dequeue(coroutine) && !poll_for(coroutine)) work_.wait_dequeue(coroutine);
      if (!coroutine) return;  // one wake-up per thread, posted by the destructor
      coroutine.resume();
    }
  }

  // Polls while this thread is idle and holds the poller's turn; returns whether it found work.
  bool poll_for(std::coroutine_handle<>& coroutine) {
    if (!polls_.load(std::memory_order_acquire) || polling_.exchange(true)) return false;
    struct turn_ends {
      std::atomic<bool>& polling;
      ~turn_ends() { polling.store(false, std::memory_order_release); }
    } ends{polling_};
    tighten_timer_slack();
    for (bool first = true;; first = false) {
      std::coroutine_handle<> kept;
      kept_by_poll() = &kept;
      const std::chrono::nanoseconds sleep = idle_poll_(first);
      kept_by_poll() = nullptr;
      if (kept) {
        coroutine = kept;
        return true;
      }
      if (sleep <= sleep.zero()) return false;
      const auto micros = std::chrono::ceil<std::chrono::microseconds>(sleep);
      if (work_.wait_dequeue_timed(coroutine, micros)) return true;
    }
  }

  // Linux delays a sleeping thread's timer by up to 50 µs by default, to batch wake-ups; a poll
  // a few tens of microseconds apart needs better. Once per thread.
  static void tighten_timer_slack() noexcept {
#if defined(__linux__)
    thread_local const bool tightened = prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL) == 0;
    static_cast<void>(tightened);
#endif
  }

  moodycamel::BlockingConcurrentQueue<std::coroutine_handle<>> work_;
  std::function<std::chrono::nanoseconds(bool)> idle_poll_;  // set once, then read only
  std::atomic<bool> polls_{false};                           // idle_poll_ is set
  std::atomic<bool> polling_{false};                         // a thread holds the poller's turn
  std::stop_source stop_;
  std::vector<std::jthread> workers_;  // last: joined before the queue goes
};

}  // namespace crema
