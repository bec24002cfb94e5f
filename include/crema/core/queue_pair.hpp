#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/pointer_queue.hpp>
#include <crema/core/detail/spin_wait.hpp>
#include <crema/core/error.hpp>
#include <crema/core/slot_pool.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <utility>

namespace crema {

/// @brief Caffe's free/full queue pair, lock-free: a `slot_pool` of preallocated free slots that
/// producers acquire (suspending while it is empty), and a queue of full slots that one consumer
/// takes (blocking while it is empty).
///
/// The capacity is the pool's slot count; the full queue never holds more. `stop()` wakes both
/// sides: producers waiting for a slot get none, and a consumer waiting for a batch gets a null
/// slot. All members are thread-safe; `pop` and `pop_until` block, the others never do.
/// @tparam Slot     the slot type
/// @tparam Executor where suspended producers resume (`crema::thread_pool`)
template <class Slot, class Executor>
class queue_pair {
 public:
  using slot_type = Slot;

  /// @param slots    how many slots (Caffe's prefetch count)
  /// @param make     makes one slot
  /// @param executor where producers waiting for a free slot are resumed
  /// @param reuse    which free slot producers get next (see `slot_pool`)
  template <class Factory>
  queue_pair(std::size_t slots, Factory&& make, Executor& executor,
             slot_reuse reuse = slot_reuse::most_recent)
      : free_(slots, std::forward<Factory>(make), executor, reuse), full_(slots + 2, 0) {}

  /// @brief Hands a full slot (or a marker the consumer understands) to the consumer.
  /// @throws crema::allocation_error if the queue cannot grow (a slot is never dropped silently)
  void push(Slot* slot) {
    if (!full_.enqueue(slot)) [[unlikely]] {
      throw allocation_error(sizeof(slot), "host", "queue_pair: the full queue cannot grow");
    }
  }
  /// @brief Gives a slot back to the free side (a lease ending).
  /// @return how many waiting producers it resumed
  std::size_t release(Slot* slot) { return free_.release(slot); }
  /// @brief Takes the next full slot, blocking until there is one; null after `stop()`.
  [[nodiscard]] Slot* pop() {
    Slot* slot = nullptr;
    if (spin_pop(slot)) return slot;
    full_.wait_dequeue(slot);
    return slot;
  }
  /// @brief Takes the next full slot, blocking until there is one or `deadline` has passed.
  /// @return whether a slot (null after `stop()`) was taken
  template <class Clock, class Duration>
  [[nodiscard]] bool pop_until(Slot*& slot, std::chrono::time_point<Clock, Duration> deadline) {
    if (spin_pop(slot)) return true;
    if (deadline == std::chrono::time_point<Clock, Duration>::max()) {
      full_.wait_dequeue(slot);
      return true;
    }
    const auto left = deadline - Clock::now();
    return left > left.zero() && full_.wait_dequeue_timed(slot, left);
  }
  /// @brief Takes the next full slot if there is one now.
  [[nodiscard]] bool try_pop(Slot*& slot) { return full_.try_dequeue(slot); }
  /// @brief Wakes the producers waiting for free slots and the consumer waiting for a full one.
  void stop() {
    free_.stop();
    full_.enqueue(nullptr);
  }
  /// @return how many full slots wait for the consumer (an estimate while others run)
  [[nodiscard]] std::size_t full_count() const { return full_.size_approx(); }

  /// @return the free side: `co_await free_slots().acquire()`, `free_slots().release(slot)`
  [[nodiscard]] slot_pool<Slot, Executor>& free_slots() noexcept { return free_; }
  [[nodiscard]] const slot_pool<Slot, Executor>& free_slots() const noexcept { return free_; }

 private:
  // A batch is often a few microseconds away: spin that long before sleeping, since a sleep
  // costs the consumer and the producer waking it a system call each. But where the consumer is
  // starved its batches are a whole batch's making away, and spinning only burns the consumer's
  // processor (on a small machine, the one its producers need): after two pops in a row whose
  // spin came to nothing, only every 16th pop spins, to notice when batches come sooner again.
  bool spin_pop(Slot*& slot) {
    const unsigned missed = missed_spins_.load(std::memory_order_relaxed);
    if (missed >= 2 && unspun_.fetch_add(1, std::memory_order_relaxed) % 16 != 15) {
      return full_.try_dequeue(slot);
    }
    const bool got = detail::spin_until([&] { return full_.try_dequeue(slot); });
    missed_spins_.store(got ? 0 : std::min(missed + 1, 2U), std::memory_order_relaxed);
    return got;
  }

  slot_pool<Slot, Executor> free_;
  // Its semaphore does not spin: the pops' own spin decides, before they wait on it.
  detail::blocking_pointer_queue<Slot> full_;
  std::atomic<unsigned> missed_spins_{0};  // pops in a row whose spin found nothing (up to 2)
  std::atomic<unsigned> unspun_{0};        // pops that did not spin, to spin every 16th
};

}  // namespace crema
