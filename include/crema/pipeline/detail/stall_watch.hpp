#pragma once

#include <crema/core/detail/library_inline.hpp>
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
std::optional<std::size_t> holder_of(std::span<channel_state* const> channels, std::size_t waiting,
                                     std::size_t running, std::size_t waiting_for_turn);

// What a blocking pull throws once `holder` has held consumer `waiting` back past the timeout.
[[noreturn]] void fail_held_back(std::size_t waiting, std::uint64_t waited_ms, std::size_t holder,
                                 const channel_state& held_by);

}  // namespace crema::detail

#if CREMA_CORE_IN_HEADERS
#include <crema/pipeline/detail/stall_watch_impl.hpp>
#endif
