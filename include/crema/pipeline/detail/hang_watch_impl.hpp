#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/library_inline.hpp>
#include <crema/core/error.hpp>
#include <crema/pipeline/detail/hang_watch.hpp>

#include <cstddef>
#include <mutex>
#include <optional>
#include <string_view>

// The hang watch: compiled once in libcrema (src/core/), or included by hang_watch.hpp, inline,
// where the core is headers alone.

namespace crema::detail {

CREMA_CORE_INLINE hang_watch::hang_watch(std::size_t producers, std::chrono::milliseconds timeout)
    : progress_(producers), seen_(producers), timeout_(timeout) {}

CREMA_CORE_INLINE std::optional<hung_producer> hang_watch::look(clock::time_point now) {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock()) return std::nullopt;  // another consumer is looking
  for (std::size_t i = 0; i < progress_.size(); ++i) {
    const producer_progress& one = progress_[i];
    const seen now_seen{one.batch.load(std::memory_order_relaxed),
                        one.phase.load(std::memory_order_relaxed),
                        one.epoch.load(std::memory_order_relaxed),
                        one.position.load(std::memory_order_relaxed), now};
    seen& last = seen_[i];
    if (!now_seen.same_record(last) || now_seen.phase == producer_phase::waiting) {
      last = now_seen;
      continue;
    }
    const auto busy = std::chrono::duration_cast<std::chrono::milliseconds>(now - last.since);
    if (busy >= timeout_) {
      return hung_producer{i, now_seen.phase, now_seen.epoch, now_seen.position, busy};
    }
  }
  return std::nullopt;
}

[[noreturn]] CREMA_CORE_INLINE void fail_hung(const hung_producer& hung,
                                              std::string_view source_key,
                                              std::chrono::milliseconds timeout) {
  fail<pipeline_error>(
      "pipeline: producer {} has been {} record {} (pass {}) of {} for {} ms (hang_timeout {} "
      "ms); a source or transform that does not return holds every consumer up, and the "
      "pipeline cannot be stopped until it does",
      hung.producer, phase_name(hung.phase), hung.position, hung.epoch, source_key,
      hung.busy.count(), timeout.count());
}

}  // namespace crema::detail
