#pragma once

#include <crema/core/detail/chrono.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <thread>

namespace crema::detail {

// Whether a producer waits, just before it takes a slot, for its consumer to give back the slot
// it handed on last, and for how long: one producer's state, on its own thread.
//
// A consumer that keeps up takes each batch as soon as it is made and gives its slot back a wake-up
// later (tens of microseconds). A producer that takes the next slot at once gets another one, last
// written a few batches ago, and the slots in use go round: producers + 1 or 2 of them. Where a
// batch is tens of megabytes, those no longer fit in a core's cache, and every store of the next
// fill misses, where a hand-written loop rewriting one buffer hits. Waiting for the slot just
// handed on (the free list gives the slot released last) keeps one slot per producer in use, in
// its cache.
//
// The wait is worth it only where it is short beside a fill: at most an eighth of the shortest of
// this producer's last four fills (one fill slowed by a preemption does not count; none before four
// fills are seen), and `longest` (`pipeline_options::warm_refill_wait`), and none where that allows
// less than `shortest`, so small batches never wait. A wait that ends with no slot back (a
// consumer that holds its batches) makes the next waits skip 1, 2, 4, ... up to 64 batches, then
// try again.
class warm_refill {
 public:
  using clock = std::chrono::steady_clock;
  static constexpr std::chrono::nanoseconds shortest{std::chrono::microseconds(10)};

  explicit warm_refill(std::chrono::nanoseconds longest) noexcept : longest_(longest) {}

  // Notes a batch about to be handed on to the channel `to`, whose consumer had given back
  // `returned` slots before it (read before the push: a slot given back at once counts), and how
  // long the batch took to fill.
  void handing_on(const void* to, std::uint64_t returned, clock::duration fill) noexcept {
    channel_ = to;
    returned_ = returned;
    fills_[next_fill_++ % fills_.size()] =
        std::chrono::duration_cast<std::chrono::nanoseconds>(fill);
  }

  // Before taking a slot of the channel `from`, whose consumer has given back `returned` slots:
  // waits until one more has come back since this producer's last batch for it, within the
  // budget, or until `stopped()`.
  // @return whether it waited and a slot came back
  template <class Stopped>
  bool wait(const void* from, const std::atomic<std::uint64_t>& returned,
            Stopped stopped) noexcept {
    if (from != channel_) return false;
    channel_ = nullptr;  // once per batch handed on
    const std::chrono::nanoseconds shortest_fill = *std::min_element(fills_.begin(), fills_.end());
    const std::chrono::nanoseconds budget = std::min(shortest_fill / 8, longest_);
    if (budget < shortest) return false;
    if (skip_ > 0) {
      --skip_;
      return false;
    }
    // Yields, not spins: the push that handed the batch on woke the consumer, often onto this
    // very processor, where a spinning producer would keep it from running for a time slice.
    const auto until = clock::now() + budget;
    for (;;) {
      if (returned.load(std::memory_order_acquire) != returned_) {
        misses_ = 0;
        ++refills_;
        return true;
      }
      std::this_thread::yield();
      if (stopped() || clock::now() >= until) break;
    }
    skip_ = std::uint32_t{1} << std::min<std::uint32_t>(misses_, 6);
    ++misses_;
    ++missed_;
    return false;
  }

  // Waits that got the slot back, and waits that ended without it.
  [[nodiscard]] std::uint64_t refills() const noexcept { return refills_; }
  [[nodiscard]] std::uint64_t missed() const noexcept { return missed_; }

 private:
  std::chrono::nanoseconds longest_;
  const void* channel_ = nullptr;
  std::uint64_t returned_ = 0;
  std::array<std::chrono::nanoseconds, 4> fills_{};  // the last four, zero until seen
  std::size_t next_fill_ = 0;
  std::uint32_t misses_ = 0;
  std::uint32_t skip_ = 0;
  std::uint64_t refills_ = 0;
  std::uint64_t missed_ = 0;
};

}  // namespace crema::detail
