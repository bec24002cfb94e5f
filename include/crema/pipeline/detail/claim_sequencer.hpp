#pragma once

#include <crema/core/slot_pool.hpp>

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <utility>
#include <vector>

namespace crema::detail {

// Lets coroutines take their turns in ticket order: `co_await turn(t)` resumes once every ticket
// before `t` is `done`, suspending (not blocking a thread) meanwhile. The pipeline claims records
// in the order of its batch numbers this way, so which records a batch holds never depends on
// which producer got there first. At most `capacity` coroutines wait at once (one per producer);
// the waiting list is reserved up front, so waiting allocates nothing. Thread-safe.
template <class Executor>
class claim_sequencer {
 public:
  // `first`: the ticket whose turn comes first (a resumed pipeline's first batch).
  claim_sequencer(Executor& executor, std::size_t capacity, std::uint64_t first = 0)
      : executor_(&executor), next_(first) {
    waiting_.reserve(capacity);
  }

  // `co_await turn(ticket)` gives true when it is the ticket's turn, false after `stop()`.
  [[nodiscard]] auto turn(std::uint64_t ticket) noexcept { return awaiter{this, ticket}; }

  // The claim of `ticket` is over: the next ticket's coroutine, if it waits, runs now.
  void done(std::uint64_t ticket) {
    std::coroutine_handle<> next;
    {
      std::scoped_lock lock(mutex_);
      next_.store(ticket + 1, std::memory_order_release);
      for (std::size_t i = 0; i < waiting_.size(); ++i) {
        if (waiting_[i].ticket == ticket + 1) {
          next = waiting_[i].coroutine;
          waiting_[i] = waiting_.back();
          waiting_.pop_back();
          break;
        }
      }
    }
    if (next) executor_->post(next);
  }

  // Resumes every waiting coroutine with false; later turns are false at once. Idempotent.
  void stop() {
    std::vector<std::coroutine_handle<>> woken;
    {
      std::scoped_lock lock(mutex_);
      stopped_.store(true, std::memory_order_release);
      for (const auto& each : waiting_) woken.push_back(each.coroutine);
      waiting_.clear();
    }
    for (const auto coroutine : woken) executor_->post(coroutine);
  }

  // How many coroutines wait for their turn now (an estimate while others run).
  [[nodiscard]] std::size_t waiting() const noexcept {
    return waiting_count_.load(std::memory_order_relaxed);
  }

 private:
  struct waiter {
    std::uint64_t ticket;
    std::coroutine_handle<> coroutine;
  };

  class awaiter {
   public:
    awaiter(claim_sequencer* owner, std::uint64_t ticket) noexcept
        : owner_(owner), ticket_(ticket) {}
    bool await_ready() const noexcept {
      // The claim before is usually a few microseconds from done: wait that long first.
      return spin_until([&] { return ready(); });
    }
    bool await_suspend(std::coroutine_handle<> coroutine) {
      std::scoped_lock lock(owner_->mutex_);
      if (ready()) return false;  // its turn came while it was getting here
      owner_->waiting_.push_back({ticket_, coroutine});
      owner_->waiting_count_.fetch_add(1, std::memory_order_relaxed);
      suspended_ = true;
      return true;
    }
    bool await_resume() const noexcept {
      if (suspended_) owner_->waiting_count_.fetch_sub(1, std::memory_order_relaxed);
      return !owner_->stopped_.load(std::memory_order_acquire);
    }

   private:
    bool ready() const noexcept {
      return owner_->stopped_.load(std::memory_order_acquire) ||
             owner_->next_.load(std::memory_order_acquire) == ticket_;
    }
    claim_sequencer* owner_;
    std::uint64_t ticket_;
    bool suspended_ = false;
  };

  Executor* executor_;
  std::mutex mutex_;
  std::vector<waiter> waiting_;  // under mutex_
  std::atomic<std::uint64_t> next_;
  std::atomic<bool> stopped_{false};
  std::atomic<std::size_t> waiting_count_{0};
};

}  // namespace crema::detail
