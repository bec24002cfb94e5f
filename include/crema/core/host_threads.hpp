#pragma once

#include <crema/core/detail/start_threads.hpp>
#include <crema/core/error.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace crema {

/// @brief A team of host threads that runs element-wise jobs: the executor `device_tree_reducer`
/// (and the MPI reducer's on-rank tree) runs its work on, where participants' buffers live in
/// host memory.
///
/// Every thread reads every participant's buffer directly (shared memory), so a collective
/// splits the elements among the threads instead of passing data along the tree: each thread
/// sums its share over all participants in the tree's order and writes the result where it goes.
/// Every buffer is then read once and written once, which is the least any allreduce can do, and
/// the sums are the tree's, bit for bit.
///
/// One backend may serve several reducers used from several threads: `parallel` is thread-safe
/// and runs one job at a time (a second caller blocks until the first job is done), so jobs
/// never mix. It blocks until every part of its job has run. The team is made once, at
/// construction.
class host_threads {
 public:
  /// @param threads how many threads share the work, the caller's included; 0 picks
  ///                `std::thread::hardware_concurrency()`
  /// @throws crema::thread_error naming how many threads were asked for and made, if the system
  ///         refuses one (the ones made are stopped and joined first)
  explicit host_threads(std::size_t threads = 0)
      : size_(threads != 0 ? threads : std::max(1U, std::thread::hardware_concurrency())) {
    detail::start_threads(
        "host_threads", size_ - 1, team_,
        [this] {
          const std::size_t part = team_.size() + 1;  // part 0 is the caller's
          return std::jthread([this, part](std::stop_token stop) { serve(part, stop); });
        },
        [this] { stop_team(); }, 1);
  }
  host_threads(const host_threads&) = delete;
  host_threads& operator=(const host_threads&) = delete;
  ~host_threads() {
    stop_team();
    team_.clear();  // joins
  }

  /// @return how many threads share the work
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

  /// @brief Runs `work(part)` for every part in [0, size()) on the team and the caller; returns
  /// when all have run. Thread-safe: jobs from several threads run one after the other.
  /// @throws crema::collective_error if called from inside a part of this backend's own job
  ///         (it would wait for itself)
  /// @throws the first exception a part threw
  void parallel(const std::function<void(std::size_t)>& work) {
    if (current_backend() == this) {
      detail::fail<collective_error>(
          "host_threads: parallel called from inside one of its own parts; it would wait for "
          "itself");
    }
    std::scoped_lock job(job_mutex_);
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
  // The backend whose part the calling thread is running, to refuse nested jobs.
  static const host_threads*& current_backend() noexcept {
    thread_local const host_threads* backend = nullptr;
    return backend;
  }

  void stop_team() {
    {
      std::scoped_lock lock(mutex_);
      for (auto& thread : team_) thread.request_stop();
    }
    wake_.notify_all();
  }

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
    const host_threads* outer = std::exchange(current_backend(), this);
    try {
      (*work_)(part);
    } catch (...) {
      std::scoped_lock lock(mutex_);
      if (!failure_) failure_ = std::current_exception();
    }
    current_backend() = outer;
  }

  std::size_t size_;
  std::mutex job_mutex_;  // one job at a time
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
