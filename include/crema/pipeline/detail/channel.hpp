#pragma once

#include <crema/core/queue_pair.hpp>
#include <crema/core/thread_pool.hpp>
#include <crema/pipeline/detail/channel_state.hpp>
#include <crema/pipeline/lease.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace crema::detail {

// One consumer's side of a pipeline: its queue pair of slots, its counters, and what the
// consumer's own thread keeps (the reorder window, what it has been given). Shared by the
// pipeline and the leases, which may outlive it.
template <class Slot>
class channel final : public queue_pair<Slot, thread_pool>, public channel_state {
 public:
  using slot_type = Slot;

  template <class Factory>
  channel(std::size_t prefetch, Factory&& make, thread_pool& pool)
      : queue_pair<Slot, thread_pool>(prefetch, std::forward<Factory>(make), pool, Slot::reuse),
        reorder(prefetch, nullptr) {}

  // A resumed pipeline's consumer: its batches numbered below `delivered` were delivered by the
  // stopped pipeline, so numbering and delivery go on from there.
  void start_at(std::uint64_t delivered_before) noexcept {
    numbered.store(delivered_before, std::memory_order_relaxed);
    handed_on.store(delivered_before, std::memory_order_relaxed);
    next_sequence = delivered_before;
    delivered = delivered_before;
  }

  // Takes back a slot a lease held; counted once the slot is free, so that a producer waiting
  // for it (`warm_refill`) finds it at the top of the free list.
  void release(Slot* slot) {
    if constexpr (misuse_checks) slot->releases.value.fetch_add(1, std::memory_order_relaxed);
    outstanding.fetch_sub(1, std::memory_order_relaxed);
    if (this->free_slots().release(slot) != 0) wakeups.fetch_add(1, std::memory_order_relaxed);
    returned.fetch_add(1, std::memory_order_release);
  }

  // The only way a lease is made.
  static lease<channel> lease_of(std::shared_ptr<channel> owner, Slot* slot) noexcept {
    return lease<channel>(std::move(owner), slot);
  }

  // Hands a full batch to the consumer. Counted before the push, so that the pull that takes it
  // always finds it counted: a snapshot meanwhile reads a batch finished and on its way as queued.
  void push_batch(Slot* slot) {
    batches_queued.fetch_add(1, std::memory_order_relaxed);
    try {
      this->push(slot);
    } catch (...) {
      batches_queued.fetch_sub(1, std::memory_order_relaxed);
      throw;
    }
  }
  // The consumer's pull took a batch pushed by `push_batch` out of the full queue.
  void took_batch() noexcept { batches_queued.fetch_sub(1, std::memory_order_relaxed); }

  // The end of a single pass, after the consumer's last batch: `batches`, how many it was
  // handed, rides on a marker through the full queue. Markers are not batches: no count.
  void push_end(std::uint64_t batches) {
    end_marker.sequence = batches;
    this->push(&end_marker);
  }
  // The consumer's pull took the marker; returns the total.
  [[nodiscard]] std::uint64_t took_end() const noexcept { return end_marker.sequence; }

  // The batches in the full queue, counted apart from it: its own size would count the end
  // marker and stop's wake-up too, and cannot tell when a marker goes in or out.
  [[nodiscard]] std::size_t queued() const override {
    return batches_queued.load(std::memory_order_relaxed);
  }
  [[nodiscard]] std::int64_t free_now() const noexcept override {
    return this->free_slots().available();
  }
  [[nodiscard]] std::size_t waiting_producers() const noexcept override {
    return this->free_slots().waiting();
  }
  std::size_t kick() override { return this->free_slots().kick(); }
  void leave_waking_to_poller(bool poller_wakes) override {
    if (poller_wakes) {
      this->free_slots().start_polling();
    } else {
      this->free_slots().stop_polling();
    }
  }
  void stop() override { queue_pair<Slot, thread_pool>::stop(); }

  // Whether a pull of this consumer is under way (checked with misuse_checks: one thread at a
  // time per consumer).
  std::atomic<bool> in_pull{false};
  // The consumer's own state: one thread at a time.
  std::vector<Slot*> reorder;
  std::uint64_t next_sequence = 0;
  std::uint64_t delivered = 0;
  std::optional<std::uint64_t> total;
  Slot end_marker{typename Slot::marker_tag{}};  // `sequence` is the consumer's total
  std::atomic<std::size_t> batches_queued{0};    // pushed by producers, not yet pulled
};

}  // namespace crema::detail
