#pragma once

#include <crema/core/detail/library_inline.hpp>
#include <crema/core/error.hpp>
#include <crema/pipeline/detail/channel_state.hpp>
#include <crema/pipeline/detail/stall_watch.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

// The stall watch: compiled once in libcrema (src/core/), or included by stall_watch.hpp,
// inline, where the core is headers alone.

namespace crema::detail {

CREMA_CORE_INLINE std::optional<std::size_t> holder_of(std::span<channel_state* const> channels,
                                                       std::size_t waiting, std::size_t running,
                                                       std::size_t waiting_for_turn) {
  if (running == 0 || channels[waiting]->queued() != 0) return std::nullopt;
  if (channels[waiting]->waiting_producers() != 0) return std::nullopt;
  std::size_t waiting_on_others = 0;
  std::optional<std::size_t> holder;
  std::size_t most = 0;
  for (std::size_t j = 0; j < channels.size(); ++j) {
    if (j == waiting) continue;
    const std::size_t count = channels[j]->waiting_producers();
    waiting_on_others += count;
    if (count > most) {
      most = count;
      holder = j;
    }
  }
  if (!holder || waiting_on_others + waiting_for_turn < running) return std::nullopt;
  return holder;
}

[[noreturn]] CREMA_CORE_INLINE void fail_held_back(std::size_t waiting, std::uint64_t waited_ms,
                                                   std::size_t holder,
                                                   const channel_state& held_by) {
  fail<pipeline_error>(
      "pipeline: consumer {} waited {} ms for a batch while the producers wait for a free slot of "
      "consumer {} ({} queued, {} leased); the consumers of a pipeline must pull in turn, or "
      "stop it",
      waiting, waited_ms, holder, held_by.waiting_batches(),
      held_by.outstanding.load(std::memory_order_relaxed));
}

}  // namespace crema::detail
