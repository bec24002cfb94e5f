#pragma once

#include <crema/core/detail/spin_wait.hpp>
#include <crema/core/error.hpp>
#include <crema/memory/resource.hpp>

#include <atomic>
#include <concepts>
#include <cstdint>
#include <exception>
#include <system_error>
#include <thread>
#include <utility>

namespace crema {

/// @brief One thread that starts the uploads of every producer's batches on one stream: the
/// producers hand it their finished batches without a lock or a runtime call, and the runtime
/// sees every copy, event and wait of the feed from one thread instead of from all of them.
///
/// The other way to keep producers apart is a stream per batch (`device_batch`'s default), where
/// each producer makes its own batch's calls. Which is faster depends on the runtime and on how
/// many producers call it at once: `crema-gpu-bench-data_layer` measures both.
///
/// Give the batches of one consumer's device a `std::shared_ptr` to one uploader (its stream is
/// made on that device); they keep it alive. A batch's finishing step `submit`s a job, which the
/// uploader runs in the order the jobs came; whoever touches the batch next `settle`s the job
/// first (waits until it has run, and gets its exception if it threw). Waiting spins a few
/// microseconds, then sleeps. `submit` and `settle` are lock-free on the submitter's side and
/// allocate nothing.
/// @tparam Stream the stream the uploads go to (`cuda_stream`, `emulated_stream`)
template <stream_policy Stream>
class batch_uploader {
 public:
  using stream_type = Stream;

  /// @brief What a batch hands the uploader: `run` is called on the uploader's thread, with its
  /// stream. A job is submitted again only once it has been settled, and outlives its run.
  class job {
   public:
    job() = default;
    job(const job&) = delete;
    job& operator=(const job&) = delete;

    /// @return whether the job was submitted and has not run yet
    [[nodiscard]] bool queued() const noexcept { return queued_.load(std::memory_order_acquire); }

   protected:
    virtual ~job() = default;

   private:
    friend batch_uploader;
    virtual void run(Stream& stream) = 0;

    job* next_ = nullptr;  // the submitted jobs, newest first
    std::atomic<bool> queued_{false};
    std::exception_ptr error_;  // what `run` threw, for `settle`
  };

  /// @brief Makes the uploader's stream from `stream_args` (a device number for `cuda_stream`)
  /// and starts its thread.
  /// @throws whatever making the stream throws (crema::cuda_error without a device)
  /// @throws crema::thread_error if the thread cannot be started
  template <class... StreamArgs>
  requires std::constructible_from<Stream, StreamArgs...>
  explicit batch_uploader(StreamArgs&&... stream_args)
      : stream_(std::forward<StreamArgs>(stream_args)...) {
    try {
      thread_ = std::thread([this] { serve(); });
    } catch (const std::system_error& e) {
      detail::fail_with_code<thread_error>(
          e.code().value(), "batch_uploader: cannot start its thread: {}", e.code().message());
    }
  }
  batch_uploader(const batch_uploader&) = delete;
  batch_uploader& operator=(const batch_uploader&) = delete;
  /// @brief Runs every job submitted, then stops the thread. Batches hold their uploader, so it
  /// goes after the last of them.
  ~batch_uploader() {
    submit(stop_);
    thread_.join();
  }

  /// @brief Queues `j` after the jobs submitted before it. Never blocks.
  void submit(job& j) noexcept {
    j.queued_.store(true, std::memory_order_relaxed);
    job* head = submitted_.load(std::memory_order_relaxed);
    do {
      j.next_ = head;
    } while (!submitted_.compare_exchange_weak(head, &j, std::memory_order_release,
                                               std::memory_order_relaxed));
    // The thread sleeps only on an empty list: a push onto a longer one finds it awake.
    if (head == nullptr) submitted_.notify_one();
  }

  /// @brief Returns once `j` has run (at once if it is not queued); rethrows what it threw, once.
  void settle(job& j) {
    if (j.queued()) [[unlikely]]
      wait_for(j);
    if (j.error_) [[unlikely]]
      std::rethrow_exception(std::exchange(j.error_, nullptr));
  }
  /// @brief As `settle`, dropping an exception: for destructors and moves.
  void settle_quietly(job& j) noexcept {
    if (j.queued()) wait_for(j);
    j.error_ = nullptr;
  }

  /// @return the stream the uploads go to
  [[nodiscard]] Stream& stream() noexcept { return stream_; }

 private:
  struct stop_job final : job {
    void run(Stream& /*stream*/) override {}
  };

  void wait_for(job& j) noexcept {
    if (detail::spin_until([&] { return !j.queued(); })) return;
    // The job's flag is never waited on: its owner may free it the moment it reads false. The
    // uploader's own counter, which outlives every job, is.
    for (;;) {
      const std::uint32_t seen = runs_.load(std::memory_order_acquire);
      if (!j.queued()) return;
      runs_.wait(seen, std::memory_order_acquire);
    }
  }

  void serve() noexcept {
    for (;;) {
      job* taken = submitted_.exchange(nullptr, std::memory_order_acquire);
      if (taken == nullptr) {
        if (!detail::spin_until(
                [&] { return submitted_.load(std::memory_order_relaxed) != nullptr; })) {
          submitted_.wait(nullptr, std::memory_order_relaxed);
        }
        continue;
      }
      job* in_order = nullptr;  // oldest first
      while (taken != nullptr) {
        job* next = taken->next_;
        taken->next_ = in_order;
        in_order = taken;
        taken = next;
      }
      bool stopping = false;
      while (in_order != nullptr) {
        job& j = *in_order;
        in_order = j.next_;
        if (&j == &stop_) {
          stopping = true;
          continue;
        }
        try {
          j.run(stream_);
        } catch (...) {
          j.error_ = std::current_exception();
        }
        j.queued_.store(false, std::memory_order_release);  // the last touch of `j`
      }
      runs_.fetch_add(1, std::memory_order_release);
      runs_.notify_all();
      if (stopping) return;
    }
  }

  Stream stream_;
  std::atomic<job*> submitted_{nullptr};
  std::atomic<std::uint32_t> runs_{0};  // groups of jobs run; what settling threads sleep on
  stop_job stop_;
  std::thread thread_;  // last: starts once the rest is made
};

}  // namespace crema
