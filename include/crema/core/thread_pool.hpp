#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/library_inline.hpp>
#include <crema/core/detail/pointer_queue.hpp>
#include <crema/core/error.hpp>

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <stop_token>
#include <thread>
#include <vector>

namespace crema {

/// @brief An executor hook: what an idle thread of a `thread_pool` does before it sleeps for want
/// of work, for work that nobody posts (the pipeline's producers waiting for slots that consumers
/// gave back without paying for a wake-up, say: `pipeline/detail/release_poller.hpp`).
///
/// One idle thread at a time calls `on_idle`, with `true` the first time since it went idle and
/// `false` after, and sleeps for as long as it returns before calling it again (posted work wakes
/// it sooner), or, when it returns zero, until work is posted; the next thread to go idle after
/// running work calls it again. The first coroutine the hook posts from `on_idle` is resumed by
/// that thread itself, without waking another. The hook must outlive the pool's threads.
class idle_hook {
 public:
  /// @param first whether this is the first call since the calling thread went idle
  /// @return how long to sleep before the next call; zero sleeps until work is posted
  virtual std::chrono::nanoseconds on_idle(bool first) noexcept = 0;

 protected:
  ~idle_hook() = default;
};

/// @brief A fixed set of `std::jthread`s that resume coroutines: the executor crema's producers
/// run on.
///
/// A coroutine moves onto the pool with `co_await pool.schedule()`; anything holding a suspended
/// coroutine (a slot pool waking a producer, say) hands it back with `post()`. So M coroutines
/// share K threads, and one that waits for something is suspended, not blocking a thread.
/// An idle thread sleeps until work is posted, or asks an `idle_hook` first.
///
/// `post` and `schedule` are thread-safe and lock-free (the queue may allocate a block now and
/// then). `request_stop()` signals the pool's `stop_token()` to the coroutines; `join()` (and the
/// destructor) stop and join the threads. A coroutine still queued then may never run (the queue
/// is not FIFO across posting threads), so whoever owns coroutines on the pool makes sure they
/// have finished before the pool goes, as `double_buffered_pipeline` does.
class thread_pool {
 public:
  /// @param threads   how many threads to start
  /// @param when_idle asked by an idle thread before it sleeps (none: it sleeps at once); must
  ///                  outlive the threads, and may be called as soon as they start
  /// @throws crema::config_error if `threads` is 0
  /// @throws crema::thread_error naming how many threads were asked for and made, if the system
  ///         refuses one (the ones made are stopped and joined first)
  explicit thread_pool(std::size_t threads, idle_hook* when_idle = nullptr);
  thread_pool(const thread_pool&) = delete;
  thread_pool& operator=(const thread_pool&) = delete;

  /// @brief Stops and joins the threads.
  ~thread_pool() { join(); }

  /// @brief Requests stop, then joins the threads once each has finished what it runs (coroutines
  /// still queued are not run). Idempotent; not from one of the pool's own threads. For an owner
  /// whose members the threads use: joined first, the order of the members stops mattering.
  void join();

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
    if (!work_.enqueue(coroutine.address())) [[unlikely]] {
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
  void wake_workers();
  void run();
  bool take(std::coroutine_handle<>& coroutine);
  // Asks the idle hook while this thread is idle and holds the hook's turn; returns whether it
  // found work.
  bool poll_for(std::coroutine_handle<>& coroutine);

  detail::blocking_untyped_queue work_;  // coroutines' addresses; null wakes a thread to return
  idle_hook* const when_idle_;           // may be null
  std::atomic<bool> polling_{false};     // a thread holds the idle hook's turn
  std::stop_source stop_;
  std::vector<std::jthread> workers_;  // last: joined before the queue goes
};

}  // namespace crema

#if CREMA_CORE_IN_HEADERS
#include <crema/core/detail/thread_pool_impl.hpp>
#endif
