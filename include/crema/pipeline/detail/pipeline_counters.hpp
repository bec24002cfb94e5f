#pragma once

#include <crema/pipeline/detail/channel_state.hpp>
#include <crema/pipeline/detail/stall_watch.hpp>
#include <crema/pipeline/stats.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace crema::detail {

// What a pipeline counts as it runs, beside each channel's own counters; `pipeline::stats()`
// reads them all into a `pipeline_stats`. Relaxed atomics: a snapshot, not a barrier.
struct pipeline_counters {
  using clock = std::chrono::steady_clock;

  explicit pipeline_counters(std::size_t producers) : suspensions(producers) {}

  static std::uint64_t elapsed_ns(clock::time_point since) {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(clock::now() - since).count());
  }

  // The counters and each consumer's channel; `running` and `waiting_for_turn` (producers
  // running, and waiting to claim) for the stall watch.
  [[nodiscard]] pipeline_stats snapshot(std::span<channel_state* const> channels,
                                        std::size_t running, std::size_t waiting_for_turn) const {
    pipeline_stats stats;
    stats.batches_produced = batches_produced.load(std::memory_order_relaxed);
    stats.records_produced = records_produced.load(std::memory_order_relaxed);
    stats.batches_consumed = batches_consumed.load(std::memory_order_relaxed);
    stats.epochs = epochs.load(std::memory_order_relaxed);
    stats.warm_refills = warm_refills.load(std::memory_order_relaxed);
    stats.consumer_wait =
        std::chrono::nanoseconds(consumer_wait_ns.load(std::memory_order_relaxed));
    stats.producer_wait =
        std::chrono::nanoseconds(producer_wait_ns.load(std::memory_order_relaxed));
    stats.suspensions_by_producer.reserve(suspensions.size());
    for (const auto& count : suspensions) {
      stats.suspensions_by_producer.push_back(count.load(std::memory_order_relaxed));
      stats.producer_suspensions += stats.suspensions_by_producer.back();
    }
    stats.consumers.reserve(channels.size());
    for (std::size_t i = 0; i < channels.size(); ++i) {
      const consumer_stats one = channels[i]->stats();
      stats.producer_wakeups += one.producer_wakeups;
      stats.queued_batches += one.queued_batches;
      stats.free_slots += one.free_slots;
      stats.waiting_producers += one.waiting_producers;
      if (one.pulling && !stats.held_back_by) {
        stats.held_back_by = holder_of(channels, i, running, waiting_for_turn);
      }
      stats.consumers.push_back(one);
    }
    return stats;
  }

  std::atomic<std::uint64_t> batches_produced{0};
  std::atomic<std::uint64_t> records_produced{0};
  std::atomic<std::uint64_t> batches_consumed{0};
  std::atomic<std::uint64_t> epochs{0};
  std::atomic<std::uint64_t> warm_refills{0};
  std::atomic<std::uint64_t> consumer_wait_ns{0};
  std::atomic<std::uint64_t> producer_wait_ns{0};
  std::vector<std::atomic<std::uint64_t>> suspensions;  // per producer
};

}  // namespace crema::detail
