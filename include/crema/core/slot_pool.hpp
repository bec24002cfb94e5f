#pragma once

#include <crema/core/detail/checked.hpp>
#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/index_queue.hpp>
#include <crema/core/detail/index_stack.hpp>
#include <crema/core/detail/pointer_queue.hpp>
#include <crema/core/detail/spin_wait.hpp>
#include <crema/core/error.hpp>

#include <atomic>
#include <coroutine>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <thread>
#include <utility>
#include <variant>
#include <vector>

namespace crema {

/// @brief Which free slot a `slot_pool` hands out next.
enum class slot_reuse {
  /// The slot released last, whose memory is the likeliest to be in the cache still: for slots
  /// the host alone reads and writes.
  most_recent,
  /// The slot released first, the longest since its last use: for slots that may go back while a
  /// device still works on them (a batch whose lease ends with the consumer's completion event,
  /// whose upload may still be running), so that the next fill waits for that work least.
  least_recent,
};

/// @brief What `co_await pool.acquire()` gives: a free slot (or none once the pool is stopped),
/// and whether the awaiting coroutine had to wait for it.
template <class Slot>
struct acquired_slot {
  Slot* slot = nullptr;    ///< the slot, or nullptr after `stop()`
  bool suspended = false;  ///< whether the coroutine was suspended until a slot came back
};

/// @brief A fixed set of preallocated slots that coroutines acquire asynchronously: the free
/// pool of a producer/consumer pair.
///
/// `co_await acquire()` takes a free slot at once when there is one; otherwise, after a short
/// spin, it suspends the awaiting coroutine (no thread blocks) until `release()` hands a slot
/// back, and then resumes it on the executor. The capacity is the slot count: slots are made once,
/// at construction, and reused, never reallocated. `stop()` resumes every waiter with no slot and
/// makes every later `acquire()` return none.
///
/// Free slots are taken last in, first out by default (`slot_reuse::most_recent`): an acquirer
/// gets the slot released most recently, whose memory is the likeliest to be in the cache still.
/// Where fewer slots are in use than the pool holds (a consumer that keeps up), the same few go
/// round and the others stay cold, so a large pool costs memory, not cache. Slots a device may
/// still be reading when they come back are better taken first in, first out
/// (`slot_reuse::least_recent`).
///
/// `acquire`, `release` and `stop` are thread-safe and lock-free (the queues may allocate a block
/// now and then); `release` may briefly spin while a waiter finishes registering itself.
/// @tparam Slot     the slot type; default-constructible is not required (see the constructor)
/// @tparam Executor anything with `post(std::coroutine_handle<>)`, e.g. `crema::thread_pool`
template <class Slot, class Executor>
class slot_pool {
 public:
  /// @param count    how many slots to make
  /// @param make     called `count` times; returns a `Slot` (it is moved into the pool)
  /// @param executor where waiting coroutines are resumed; must outlive the pool
  /// @param reuse    which free slot goes out next; slot 0 goes out first either way
  /// @throws crema::config_error if `count` slots could not fit in this machine's memory, or
  ///         are more than 2^32 - 1
  template <class Factory>
  slot_pool(std::size_t count, Factory&& make, Executor& executor,
            slot_reuse reuse = slot_reuse::most_recent)
      : executor_(&executor),
        capacity_(checked_count(count)),
        free_(free_list_for(reuse, capacity_)),
        available_(static_cast<std::int64_t>(capacity_)) {
    slots_.reserve(capacity_);  // never grows again: the slots' addresses are stable
    for (std::uint32_t i = 0; i < capacity_; ++i) slots_.push_back(make());
    if (reuse == slot_reuse::most_recent) {
      for (std::uint32_t i = capacity_; i-- > 0;) push_free(i);
    } else {
      for (std::uint32_t i = 0; i < capacity_; ++i) push_free(i);
    }
  }
  slot_pool(const slot_pool&) = delete;
  slot_pool& operator=(const slot_pool&) = delete;

  /// @return an awaitable giving an `acquired_slot<Slot>`
  [[nodiscard]] auto acquire() noexcept { return awaiter{this}; }

  /// @brief Gives a slot back: to a waiting coroutine (resumed on the executor), else to the pool.
  /// `slot` must be one of this pool's, acquired and not released since.
  /// With `wake_in_groups(n)`, a slot a coroutine waits for is parked instead until `n` are, or
  /// until every waiting coroutine has one, and the release that completes the group resumes
  /// them all: one wake-up per `n` releases (per waiter count, where fewer wait).
  /// While `start_polling` holds, it is parked and nobody is resumed.
  /// @return how many waiting coroutines it resumed (each a wake-up where the executor's thread
  ///         sleeps)
  std::size_t release(Slot* slot) {
    const std::int64_t before = available_.fetch_add(1, std::memory_order_acq_rel);
    if (before >= 0) {
      push_free(index_of(slot));
      return 0;
    }
    if (group_ == 1 && !polled_.load()) {
      hand_over(pop_waiter(), slot);
      return 1;
    }
    // The slot belongs to a waiter; counted first, so whoever wakes the parked knows to expect it.
    // Counted before `polled_` is read, and `stop_polling` writes it before it counts: one of
    // them sees the other, so a slot parked as polling ends is never left behind.
    const std::size_t parked = parked_count_.fetch_add(1) + 1;
    parked_.enqueue(slot);
    // A stop since the first count found this slot's waiter neither waiting nor parked for: it is
    // this release's to wake. (Read after the count: a stop that missed the count is seen here.)
    if (stopped_.load()) return wake_parked();
    // A group fuller than the waiters can ever be (two producers, a group of eight) would wake
    // nobody: once every waiter has its slot (this one was the last without), wake them.
    if (polled_.load() || (parked < group_ && before < -1)) return 0;
    return wake_parked();
  }

  /// @brief Resumes the coroutines that parked slots belong to now, however few the slots: for
  /// a consumer about to wait for what those coroutines make, or a poller. Cheap when nothing is
  /// parked.
  /// @return how many slots it handed over
  std::size_t kick() { return parked_count_.load() != 0 ? wake_parked() : 0; }

  /// @brief Makes `release` wake no coroutine at all, whatever the group: slots released to
  /// waiters stay parked until someone `kick()`s, which whoever calls this promises to do soon
  /// and often (an idle thread polling, as the pipeline's `release_poller` does). Thread-safe.
  void start_polling() noexcept { polled_.store(true); }
  /// @brief Ends `start_polling`: `release` wakes waiters again, and the slots parked meanwhile
  /// are handed over now. Thread-safe.
  /// @return how many slots it handed over
  std::size_t stop_polling() {
    polled_.store(false);
    return kick();
  }
  /// @return whether `release` leaves the waking to a poller now
  [[nodiscard]] bool polled() const noexcept { return polled_.load(std::memory_order_relaxed); }

  /// @brief Makes `release` wake waiting coroutines once per `slots` released slots, or once
  /// every waiter has a slot where fewer wait (1, the default, wakes one per slot). Whoever waits
  /// for what the coroutines make must `kick()` first. Call before the pool is shared.
  void wake_in_groups(std::size_t slots) noexcept { group_ = slots == 0 ? 1 : slots; }

  /// @brief Wakes every waiting coroutine with no slot; every later `acquire()` gets none.
  /// Idempotent.
  void stop() {
    if (stopped_.exchange(true, std::memory_order_acq_rel)) return;
    // Permits that no slot backs: later acquirers see `stopped_` and take none.
    const std::int64_t before = available_.fetch_add(stop_permits, std::memory_order_acq_rel);
    for (std::int64_t i = before; i < 0; ++i) hand_over(pop_waiter(), nullptr);
    // The waiters of parked slots were not counted above: their permits were granted. A release
    // whose slot is counted for a waiter but not yet parked wakes that waiter itself.
    for (std::size_t parked = parked_count_.exchange(0, std::memory_order_acq_rel); parked > 0;
         --parked) {
      hand_over(pop_waiter(), nullptr);
    }
  }

  /// @return the number of slots
  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  /// @return how many slots are free now (an estimate while others run); negative values mean
  ///         coroutines are waiting
  [[nodiscard]] std::int64_t available() const noexcept {
    const auto value = available_.load(std::memory_order_relaxed);
    return stopped_.load(std::memory_order_relaxed) ? value - stop_permits : value;
  }
  /// @return how many coroutines wait for a slot now (an estimate while others run)
  [[nodiscard]] std::size_t waiting() const noexcept {
    const std::int64_t free_now = available();
    return (free_now < 0 ? static_cast<std::size_t>(-free_now) : 0) +
           parked_count_.load(std::memory_order_relaxed);
  }
  /// @return whether `stop()` was called
  [[nodiscard]] bool stopped() const noexcept { return stopped_.load(std::memory_order_acquire); }

 private:
  static constexpr std::int64_t stop_permits = std::int64_t{1} << 40;

  // Slots are numbered in 32 bits for the free list (the stack's largest value means none), and
  // the counter is signed and `stop()` adds to it; a count past memory is a mistake anyway.
  static std::uint32_t checked_count(std::size_t count) {
    const auto bytes = detail::checked_mul(count, sizeof(Slot) + sizeof(std::uint32_t));
    const auto memory = detail::physical_memory_bytes();
    if (!bytes || (memory && *bytes > *memory)) {
      detail::fail<config_error>("slot_pool: {} slots of {} bytes do not fit in memory", count,
                                 sizeof(Slot));
    }
    constexpr std::size_t most = std::numeric_limits<std::uint32_t>::max() - 1;
    if (count > most) {
      detail::fail<config_error>("slot_pool: {} slots are more than a pool holds ({})", count,
                                 most);
    }
    return static_cast<std::uint32_t>(count);
  }

  struct waiter {
    std::coroutine_handle<> coroutine;
    acquired_slot<Slot> result{nullptr, true};
  };

  class awaiter {
   public:
    explicit awaiter(slot_pool* pool) noexcept : pool_(pool) {}

    bool await_ready() noexcept {
      // A slot often comes back within microseconds: wait that long before paying for a
      // suspension and a resumption through the executor. Not when others already wait: a
      // returned slot goes to them first, so spinning could only waste the thread.
      detail::spin_until([&] { return pool_->available_.load(std::memory_order_relaxed) != 0; });
      if (pool_->available_.fetch_sub(1, std::memory_order_acq_rel) > 0) {
        waiter_.result = {pool_->take_free_slot(), false};
        return true;
      }
      return false;
    }
    void await_suspend(std::coroutine_handle<> coroutine) noexcept {
      waiter_.coroutine = coroutine;
      pool_->waiters_.enqueue(&waiter_);
    }
    acquired_slot<Slot> await_resume() const noexcept { return waiter_.result; }

   private:
    slot_pool* pool_;
    waiter waiter_;
  };

  // A permit was granted: a slot is in the free list or about to be (its release is between the
  // counter and the list, or its push into the ring is still filling its cell).
  Slot* take_free_slot() noexcept {
    if (stopped_.load(std::memory_order_acquire)) return nullptr;
    std::uint32_t index = 0;
    while (!pop_free(index)) std::this_thread::yield();
    return &slots_[index];
  }
  using free_list = std::variant<detail::index_stack, detail::index_queue>;
  static free_list free_list_for(slot_reuse reuse, std::uint32_t capacity) {
    return reuse == slot_reuse::most_recent
               ? free_list(std::in_place_type<detail::index_stack>, capacity)
               : free_list(std::in_place_type<detail::index_queue>, capacity);
  }
  void push_free(std::uint32_t index) noexcept {
    if (auto* stack = std::get_if<detail::index_stack>(&free_)) {
      stack->push(index);
    } else {
      std::get_if<detail::index_queue>(&free_)->push(index);
    }
  }
  bool pop_free(std::uint32_t& index) noexcept {
    if (auto* stack = std::get_if<detail::index_stack>(&free_)) return stack->pop(index);
    return std::get_if<detail::index_queue>(&free_)->pop(index);
  }
  std::uint32_t index_of(const Slot* slot) const noexcept {
    return static_cast<std::uint32_t>(slot - slots_.data());
  }
  void hand_over(waiter* next, Slot* slot) {
    next->result.slot = slot;
    executor_->post(next->coroutine);
  }

  // Gives every parked slot to a waiting coroutine. The first resumed takes the others from the
  // free queue without suspending; the rest go to the waiters they were counted for.
  std::size_t wake_parked() {
    const std::size_t parked = parked_count_.exchange(0, std::memory_order_acq_rel);
    if (parked == 0) return 0;
    Slot* first = take_parked();
    waiter* next = pop_waiter();
    for (std::size_t i = 1; i < parked; ++i) hand_over(pop_waiter(), take_parked());
    hand_over(next, first);
    return parked;
  }
  Slot* take_parked() noexcept {
    Slot* slot = nullptr;
    while (!parked_.try_dequeue(slot)) std::this_thread::yield();  // its enqueue is under way
    return slot;
  }

  // The counter says a coroutine waits: it is in the queue or about to be.
  waiter* pop_waiter() noexcept {
    waiter* next = nullptr;
    while (!waiters_.try_dequeue(next)) std::this_thread::yield();
    return next;
  }

  Executor* executor_;
  std::uint32_t capacity_;
  std::vector<Slot> slots_;  // reserved once: stable addresses
  free_list free_;           // numbers of the free slots, in the order they go out
  detail::pointer_queue<waiter> waiters_;
  detail::pointer_queue<Slot> parked_;  // released for waiters, not handed over yet
  std::atomic<std::size_t> parked_count_{0};
  std::size_t group_ = 1;
  std::atomic<bool> polled_{false};  // a poller kicks: `release` wakes nobody
  std::atomic<std::int64_t> available_;
  std::atomic<bool> stopped_{false};
};

}  // namespace crema
