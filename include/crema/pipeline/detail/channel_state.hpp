#pragma once

#include <crema/pipeline/stats.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace crema::detail {

// What the engine's parts that do not know the slot type see of one consumer's channel: its
// counters, and its queues through a few virtual calls (none on the path of a batch). The stall
// watch, the release poller, the counters' snapshot and the stop are written once against it,
// for every Source x Transform.
class channel_state {
 public:
  channel_state() = default;
  channel_state(const channel_state&) = delete;
  channel_state& operator=(const channel_state&) = delete;

  // Full slots in its queue, not yet taken by the consumer (an estimate while others run).
  [[nodiscard]] virtual std::size_t queued() const = 0;
  // Full slots waiting for the consumer: those in its queue, and those an ordered consumer took
  // early into its reorder window, where they wait for the batches numbered before them.
  [[nodiscard]] std::size_t waiting_batches() const {
    return queued() + in_reorder_window.load(std::memory_order_relaxed);
  }
  // Free slots; negative when producers wait for one (an estimate while others run).
  [[nodiscard]] virtual std::int64_t free_now() const noexcept = 0;
  // Producers suspended for one of its slots, parked ones included.
  [[nodiscard]] virtual std::size_t waiting_producers() const noexcept = 0;
  // Hands the slots released for waiting producers, and parked, to them now.
  virtual std::size_t kick() = 0;
  // Whether releases leave waking the producers to a poller (which kicks soon and often).
  virtual void leave_waking_to_poller(bool poller_wakes) = 0;
  // Wakes the producers waiting for its slots and the consumer waiting for a batch.
  virtual void stop() = 0;

  // Its part of the pipeline's stats, `held_back_by` aside.
  [[nodiscard]] consumer_stats stats() const {
    consumer_stats one;
    one.batches_consumed = consumed.load(std::memory_order_relaxed);
    one.queued_batches = waiting_batches();
    one.leased_batches = outstanding.load(std::memory_order_relaxed);
    const std::int64_t free_slots = free_now();
    one.free_slots = free_slots > 0 ? static_cast<std::size_t>(free_slots) : 0;
    one.waiting_producers = waiting_producers();
    one.pulling = pulling.load(std::memory_order_relaxed);
    one.producer_wakeups = wakeups.load(std::memory_order_relaxed);
    return one;
  }

  // Batch numbers handed out, one per slot acquired, in the order of acquisition: every number
  // not yet delivered holds a slot, so the consumer's next batch always has one.
  std::atomic<std::uint64_t> numbered{0};
  std::atomic<std::uint64_t> handed_on{0};        // batches producers gave it
  std::atomic<std::size_t> outstanding{0};        // leases the consumer holds
  std::atomic<std::uint64_t> consumed{0};         // batches delivered, for stats
  std::atomic<bool> pulling{false};               // the consumer waits in a pull
  std::atomic<std::uint64_t> wakeups{0};          // releases and pulls of it that resumed producers
  std::atomic<std::uint64_t> returned{0};         // slots its leases gave back
  std::atomic<std::size_t> in_reorder_window{0};  // written by the consumer's thread only

 protected:
  ~channel_state() = default;
};

}  // namespace crema::detail
