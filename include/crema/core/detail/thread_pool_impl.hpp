#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/library_inline.hpp>
#include <crema/core/detail/start_threads.hpp>
#include <crema/core/error.hpp>
#include <crema/core/thread_pool.hpp>

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <thread>

// thread_pool's threads: compiled once in libcrema (src/core/), or included by thread_pool.hpp,
// inline, where the core is headers alone.

namespace crema {

CREMA_CORE_INLINE thread_pool::thread_pool(std::size_t threads, idle_hook* when_idle)
    : when_idle_(when_idle) {
  if (threads == 0) detail::fail<config_error>("thread_pool: threads must be at least 1, got 0");
  detail::start_threads(
      "thread_pool", threads, workers_, [this] { return std::jthread([this] { run(); }); },
      [this] { wake_workers(); });
}

CREMA_CORE_INLINE void thread_pool::join() {
  stop_.request_stop();
  wake_workers();
  workers_.clear();  // joins
}

// One empty handle per thread: each thread that takes one returns.
CREMA_CORE_INLINE void thread_pool::wake_workers() {
  for (std::size_t i = 0; i < workers_.size(); ++i) work_.enqueue(nullptr);
}

CREMA_CORE_INLINE void thread_pool::run() {
  current_pool() = this;
  for (;;) {
    std::coroutine_handle<> coroutine;
    if (!take(coroutine) && !poll_for(coroutine)) {
      void* address = nullptr;
      work_.wait_dequeue(address);
      coroutine = std::coroutine_handle<>::from_address(address);
    }
    if (!coroutine) return;  // one wake-up per thread, posted by the destructor
    coroutine.resume();
  }
}

CREMA_CORE_INLINE bool thread_pool::take(std::coroutine_handle<>& coroutine) {
  void* address = nullptr;
  if (!work_.try_dequeue(address)) return false;
  coroutine = std::coroutine_handle<>::from_address(address);
  return true;
}

CREMA_CORE_INLINE bool thread_pool::poll_for(std::coroutine_handle<>& coroutine) {
  if (when_idle_ == nullptr || polling_.exchange(true)) return false;
  struct turn_ends {
    std::atomic<bool>& polling;
    ~turn_ends() { polling.store(false, std::memory_order_release); }
  } ends{polling_};
  for (bool first = true;; first = false) {
    std::coroutine_handle<> kept;
    kept_by_poll() = &kept;
    const std::chrono::nanoseconds sleep = when_idle_->on_idle(first);
    kept_by_poll() = nullptr;
    if (kept) {
      coroutine = kept;
      return true;
    }
    if (sleep <= sleep.zero()) return false;
    const auto micros = std::chrono::ceil<std::chrono::microseconds>(sleep);
    if (void* address = nullptr; work_.wait_dequeue_timed(address, micros)) {
      coroutine = std::coroutine_handle<>::from_address(address);
      return true;
    }
  }
}

}  // namespace crema
