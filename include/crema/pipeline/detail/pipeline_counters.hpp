#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/library_inline.hpp>
#include <crema/pipeline/detail/channel_state.hpp>
#include <crema/pipeline/detail/stall_watch.hpp>
#include <crema/pipeline/stats.hpp>

#include <atomic>
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
                                        std::size_t running, std::size_t waiting_for_turn) const;

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

#if CREMA_CORE_IN_HEADERS
#include <crema/pipeline/detail/pipeline_counters_impl.hpp>
#endif
