#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/fmt.hpp>
#include <crema/core/detail/library_inline.hpp>
#include <crema/pipeline/stats.hpp>

#include <string>

// pipeline_stats' text: compiled once in libcrema (src/core/), or included by stats.hpp, inline,
// where the core is headers alone.

namespace crema::detail {

CREMA_CORE_INLINE std::string describe(const pipeline_stats& stats) {
  const auto milliseconds = [](std::chrono::nanoseconds time) {
    return std::chrono::duration<double, std::milli>(time).count();
  };
  std::string line = format(
      "produced {} batches ({} records), consumed {}, epochs {}, queued {}, "
      "free {}, waiting producers {}, consumer wait {:.1f} ms, producer wait {:.1f} ms "
      "({} suspensions, {} woken by consumers)",
      stats.batches_produced, stats.records_produced, stats.batches_consumed, stats.epochs,
      stats.queued_batches, stats.free_slots, stats.waiting_producers,
      milliseconds(stats.consumer_wait), milliseconds(stats.producer_wait),
      stats.producer_suspensions, stats.producer_wakeups);
  if (stats.warm_refills != 0) {
    line += format(", {} refilled warm", stats.warm_refills);
  }
  if (stats.held_back_by) {
    line += format(", held back by consumer {}", *stats.held_back_by);
  }
  return line;
}

}  // namespace crema::detail
