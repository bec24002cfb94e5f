#pragma once

#include <crema/core/error.hpp>
#include <crema/pipeline/detail/channel_state.hpp>

#include <cstddef>
#include <optional>
#include <span>

namespace crema::detail {

// Consumers of one pipeline are dealt batches in turn, so one that stops pulling (or holds its
// leases) holds the others back once its slots are full. The stall watch says which one.

// The consumer that holds consumer `waiting` back, if one does: every running producer waits
// (for a slot, or for its turn to claim behind one that does: `waiting_for_turn`), none waits
// for a slot of `waiting`, and this one has the most producers waiting for its slots.
inline std::optional<std::size_t> holder_of(std::span<channel_state* const> channels,
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

// What a blocking pull throws once `holder` has held consumer `waiting` back past the timeout.
[[noreturn]] inline void fail_held_back(std::size_t waiting, std::uint64_t waited_ms,
                                        std::size_t holder, const channel_state& held_by) {
  fail<pipeline_error>(
      "pipeline: consumer {} waited {} ms for a batch while the producers wait for a free slot of "
      "consumer {} ({} queued, {} leased); the consumers of a pipeline must pull in turn, or "
      "stop it",
      waiting, waited_ms, holder, held_by.waiting_batches(),
      held_by.outstanding.load(std::memory_order_relaxed));
}

}  // namespace crema::detail
