#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/library_inline.hpp>
#include <crema/pipeline/detail/channel_state.hpp>
#include <crema/pipeline/detail/release_poller.hpp>
#include <crema/pipeline/detail/run_state.hpp>

#if defined(__linux__)
#include <sys/prctl.h>
#endif

#include <algorithm>
#include <cstddef>
#include <exception>

// The release poller: compiled once in libcrema (src/core/), or included by release_poller.hpp,
// inline, where the core is headers alone.

namespace crema::detail {

CREMA_CORE_INLINE std::chrono::nanoseconds release_poller::on_idle(bool just_idle) noexcept {
  if (!armed_.load(std::memory_order_acquire)) return std::chrono::nanoseconds::zero();
  tighten_timer_slack();
  try {
    return interval_after(just_idle);
  } catch (...) {  // a queue that could not grow: the slots it held are lost, so stop
    run_->fail(std::current_exception(),
               "pipeline: handing released slots to waiting producers failed");
    return std::chrono::nanoseconds::zero();
  }
}

CREMA_CORE_INLINE std::chrono::nanoseconds release_poller::interval_after(bool just_idle) {
  if (run_->stop_requested()) {
    if (polling_) end_polling();
    return std::chrono::nanoseconds::zero();
  }
  if (!polling_) {
    polling_ = true;
    for (channel_state* each : channels_) each->leave_waking_to_poller(true);
  }
  if (kick_all() != 0) {
    learned_ = interval_;
    interval_ = std::max(shortest_poll, interval_ * 2 / 3);
  } else if (just_idle) {
    interval_ = learned_;
  } else if (interval_ * 3 / 2 > longest_poll) {
    end_polling();
    return std::chrono::nanoseconds::zero();
  } else {
    interval_ = interval_ * 3 / 2;
  }
  return interval_;
}

CREMA_CORE_INLINE std::size_t release_poller::kick_all() {
  std::size_t handed = 0;
  for (channel_state* each : channels_) handed += each->kick();
  return handed;
}

CREMA_CORE_INLINE void release_poller::end_polling() {
  polling_ = false;
  for (channel_state* each : channels_) each->leave_waking_to_poller(false);
}

CREMA_CORE_INLINE void release_poller::tighten_timer_slack() noexcept {
#if defined(__linux__)
  thread_local const bool tightened = prctl(PR_SET_TIMERSLACK, 1000UL, 0UL, 0UL, 0UL) == 0;
  static_cast<void>(tightened);
#endif
}

}  // namespace crema::detail
