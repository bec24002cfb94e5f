#pragma once

#include <crema/core/detail/library_inline.hpp>
#include <crema/core/error.hpp>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <stop_token>
#include <string>
#include <utility>

namespace crema::detail {

// The message `make()` builds, or a plainer one should building it fail: describing an error
// must never raise another.
template <class Make>
std::string failure_message(Make&& make) noexcept {
  try {
    return make();
  } catch (...) {
  }
  try {
    return "pipeline: a producer failed";
  } catch (...) {
    return {};
  }
}

// What every part of a running pipeline shares: whether it is stopping, its first failure, and
// how many producers still run. Stopping is one request on its stop source: the engine hangs the
// claims and the channels on it (a `std::stop_callback`), so whoever stops the run (a failure
// anywhere, `stop()`, the destructor) stops them, once. Thread-safe.
class run_state {
 public:
  [[nodiscard]] std::stop_token token() const noexcept { return stop_.get_token(); }
  [[nodiscard]] bool stop_requested() const noexcept { return stop_.stop_requested(); }
  // Stops the run; false if it was stopping already.
  bool request_stop() noexcept { return stop_.request_stop(); }

  // Keeps the first failure, a pipeline_error with `message` and `cause` nested in it, and stops:
  // marks the failure before the stop, which `stopped_without_failure` relies on.
  void fail(std::exception_ptr cause, std::string message) noexcept;
  // Whether a failure stopped the run; once it did, consumers get what was finished before it,
  // then the failure.
  [[nodiscard]] bool failed() const noexcept { return failed_.load(std::memory_order_acquire); }
  // Whether the run was stopped, and not by a failure. Reads the stop first: a stop that `fail`
  // made comes after its mark, so the failure is seen with it. (Read the other way round, a
  // failure between the two reads looked like a plain stop, and a consumer ended its pass
  // without the error.)
  [[nodiscard]] bool stopped_without_failure() const noexcept {
    return stop_requested() && !failed();
  }
  [[noreturn]] void rethrow_failure() {
    std::scoped_lock lock(error_mutex_);
    std::rethrow_exception(error_);
  }

  void start_producers(std::size_t count) {
    std::scoped_lock lock(done_mutex_);
    running_ = count;
    alive_.store(count, std::memory_order_relaxed);
  }
  // Producers still running (without the lock: may be stale by the time it is read).
  [[nodiscard]] std::size_t producers_alive() const noexcept {
    return alive_.load(std::memory_order_relaxed);
  }
  // A producer ends. The last one out, unless the run was stopped, calls `last_out()` (under the
  // lock, so the pipeline cannot go before it returns).
  template <class LastOut>
  void producer_ends(LastOut&& last_out) noexcept {
    std::unique_lock lock(done_mutex_);
    alive_.fetch_sub(1, std::memory_order_relaxed);
    if (--running_ == 0 && !stop_requested()) last_out();
    done_.notify_all();  // under the lock: the pipeline may be destroyed once it is released
  }
  void wait_for_producers() {
    std::unique_lock lock(done_mutex_);
    done_.wait(lock, [&] { return running_ == 0; });
  }

 private:
  std::stop_source stop_;

  std::mutex error_mutex_;
  std::exception_ptr error_;  // the first failure; under error_mutex_
  std::atomic<bool> failed_{false};

  std::mutex done_mutex_;
  std::condition_variable done_;
  std::size_t running_ = 0;            // producers not finished; under done_mutex_
  std::atomic<std::size_t> alive_{0};  // the same, readable without the lock
};

}  // namespace crema::detail

#if CREMA_CORE_IN_HEADERS
#include <crema/pipeline/detail/run_state_impl.hpp>
#endif
