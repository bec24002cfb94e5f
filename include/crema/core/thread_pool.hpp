#pragma once

#include <crema/core/detail/concurrentqueue.hpp>
#include <crema/core/detail/start_threads.hpp>
#include <crema/core/error.hpp>

#include <coroutine>
#include <cstddef>
#include <stop_token>
#include <thread>
#include <vector>

namespace crema {

/// @brief A fixed set of `std::jthread`s that resume coroutines: the executor crema's producers
/// run on.
///
/// A coroutine moves onto the pool with `co_await pool.schedule()`; anything holding a suspended
/// coroutine (a slot pool waking a producer, say) hands it back with `post()`. So M coroutines
/// share K threads, and one that waits for something is suspended, not blocking a thread.
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

  // One empty handle per thread: each thread that takes one returns.
  void wake_workers() {
    for (std::size_t i = 0; i < workers_.size(); ++i) work_.enqueue(std::coroutine_handle<>{});
  }

  void run() {
    current_pool() = this;
    for (;;) {
      std::coroutine_handle<> coroutine;
      work_.wait_dequeue(coroutine);
      if (!coroutine) return;  // one wake-up per thread, posted by the destructor
      coroutine.resume();
    }
  }

  moodycamel::BlockingConcurrentQueue<std::coroutine_handle<>> work_;
  std::stop_source stop_;
  std::vector<std::jthread> workers_;  // last: joined before the queue goes
};

}  // namespace crema
