#pragma once

#include <crema/core/detail/library_inline.hpp>
#include <crema/pipeline/detail/pipeline_counters.hpp>
#include <crema/pipeline/detail/stall_watch.hpp>
#include <crema/pipeline/stats.hpp>

#include <atomic>
#include <cstddef>
#include <span>

// The counters' snapshot: compiled once in libcrema (src/core/), or included by
// pipeline_counters.hpp, inline, where the core is headers alone.

namespace crema::detail {

CREMA_CORE_INLINE pipeline_stats
pipeline_counters::snapshot(std::span<channel_state* const> channels, std::size_t running,
                            std::size_t waiting_for_turn) const {
  pipeline_stats stats;
  stats.batches_produced = batches_produced.load(std::memory_order_relaxed);
  stats.records_produced = records_produced.load(std::memory_order_relaxed);
  stats.batches_consumed = batches_consumed.load(std::memory_order_relaxed);
  stats.epochs = epochs.load(std::memory_order_relaxed);
  stats.warm_refills = warm_refills.load(std::memory_order_relaxed);
  stats.consumer_wait = std::chrono::nanoseconds(consumer_wait_ns.load(std::memory_order_relaxed));
  stats.producer_wait = std::chrono::nanoseconds(producer_wait_ns.load(std::memory_order_relaxed));
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

}  // namespace crema::detail
