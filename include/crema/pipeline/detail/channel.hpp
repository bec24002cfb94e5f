#pragma once

#include <crema/core/thread_pool.hpp>
#include <crema/pipeline/lease.hpp>
#include <crema/pipeline/queue_pair.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

namespace crema::detail {

// One consumer's side of a pipeline: its queue pair of slots, the numbers its batches get, and
// what the consumer's own thread keeps (the reorder window, what it has been given). Shared by
// the pipeline and the leases, which may outlive it.
template <class Slot>
class channel : public queue_pair<Slot, thread_pool> {
 public:
  using slot_type = Slot;

  template <class Factory>
  channel(std::size_t prefetch, Factory&& make, thread_pool& pool)
      : queue_pair<Slot, thread_pool>(prefetch, std::forward<Factory>(make), pool, Slot::reuse),
        reorder(prefetch, nullptr) {}

  // Takes back a slot a lease held; counted once the slot is free, so that a producer waiting
  // for it (`warm_refill`) finds it at the top of the free list.
  void release(Slot* slot) {
    outstanding.fetch_sub(1, std::memory_order_relaxed);
    if (this->free_slots().release(slot) != 0) wakeups.fetch_add(1, std::memory_order_relaxed);
    returned.fetch_add(1, std::memory_order_release);
  }

  // The only way a lease is made.
  static lease<channel> lease_of(std::shared_ptr<channel> owner, Slot* slot) noexcept {
    return lease<channel>(std::move(owner), slot);
  }

  // Batch numbers handed out, one per slot acquired, in the order of acquisition: every number
  // not yet delivered holds a slot, so the consumer's next batch always has one.
  std::atomic<std::uint64_t> numbered{0};
  std::atomic<std::uint64_t> handed_on{0};  // batches producers gave it
  std::atomic<std::size_t> outstanding{0};  // leases the consumer holds
  std::atomic<std::uint64_t> consumed{0};   // batches delivered, for stats
  std::atomic<bool> pulling{false};         // the consumer waits in a pull
  std::atomic<std::uint64_t> wakeups{0};    // releases and pulls of it that resumed producers
  std::atomic<std::uint64_t> returned{0};   // slots its leases gave back
  // The consumer's own state: one thread at a time.
  std::vector<Slot*> reorder;
  std::uint64_t next_sequence = 0;
  std::uint64_t delivered = 0;
  std::optional<std::uint64_t> total;
  Slot end_marker{typename Slot::marker_tag{}};  // `sequence` is the consumer's total
};

}  // namespace crema::detail
