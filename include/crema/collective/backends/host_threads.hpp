#pragma once

#include <crema/core/error.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace crema {

/// @brief The host-thread backend of `device_tree_reducer`: participants' buffers live in host
/// memory, and a team of threads does the element-wise work.
///
/// Every thread reads every participant's buffer directly (shared memory), so a collective
/// splits the elements among the threads instead of passing data along the tree: each thread
/// sums its share over all participants in the tree's order and writes the result where it goes.
/// Every buffer is then read once and written once, which is the least any allreduce can do, and
/// the sums are the tree's, bit for bit.
///
/// `parallel` is called by one thread at a time (the reducer serializes its collectives); it
/// blocks until every part has run. The team is made once, at construction.
class host_threads {
 public:
  /// @param threads how many threads share the work, the caller's included; 0 picks
  ///                `std::thread::hardware_concurrency()`
  explicit host_threads(std::size_t threads = 0)
      : size_(threads != 0 ? threads : std::max(1U, std::thread::hardware_concurrency())) {
    for (std::size_t i = 1; i < size_; ++i) {
      team_.emplace_back([this, i](std::stop_token stop) { serve(i, stop); });
    }
  }
  host_threads(const host_threads&) = delete;
  host_threads& operator=(const host_threads&) = delete;
  ~host_threads() {
    {
      std::scoped_lock lock(mutex_);
      for (auto& thread : team_) thread.request_stop();
    }
    wake_.notify_all();
    team_.clear();  // joins
  }

  /// @return how many threads share the work
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

  /// @brief Runs `work(part)` for every part in [0, size()) on the team and the caller; returns
  /// when all have run.
  /// @throws the first exception a part threw
  void parallel(const std::function<void(std::size_t)>& work) {
    {
      std::scoped_lock lock(mutex_);
      work_ = &work;
      pending_ = size_ - 1;
      failure_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    run_part(0);
    std::unique_lock lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    work_ = nullptr;
    if (failure_) std::rethrow_exception(failure_);
  }

 private:
  void serve(std::size_t part, const std::stop_token& stop) {
    std::size_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stop.stop_requested() || generation_ != seen; });
        if (stop.stop_requested()) return;
        seen = generation_;
      }
      run_part(part);
      std::scoped_lock lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }

  void run_part(std::size_t part) {
    try {
      (*work_)(part);
    } catch (...) {
      std::scoped_lock lock(mutex_);
      if (!failure_) failure_ = std::current_exception();
    }
  }

  std::size_t size_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(std::size_t)>* work_ = nullptr;
  std::size_t pending_ = 0;
  std::size_t generation_ = 0;
  std::exception_ptr failure_;
  std::vector<std::jthread> team_;  // last: joined before the rest goes
};

}  // namespace crema
