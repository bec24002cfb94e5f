#pragma once

#include <crema/collective/reduction.hpp>

#include <concepts>
#include <cstddef>

/// @file
/// `tree_collective`, the concept every collective model of crema offers, and its traits. The
/// models, one folder each: `host/` (`device_tree_reducer`, on host threads), `cuda/`
/// (`cuda_p2p_reducer`, CUDA peer copies), `nccl/` (`nccl_reducer`), `mpi/` (`mpi_reducer`, across
/// ranks); each ends with `static_assert(tree_collective<...>)`. `p2p_sync` is written once over
/// the concept.

namespace crema {

/// @brief A collective over one buffer per participant, in place, along a tree: what every
/// backend of crema offers (host threads, CUDA peer copies, NCCL, MPI), so that `p2p_sync` and an
/// engine's step loop are written once.
///
/// - `broadcast(root)`: every participant's buffer becomes a copy of `root`'s.
/// - `reduce(root, op)`: `root`'s buffer receives the sum (times 1/N for `average`); the others
///   are left as they were.
/// - `allreduce(op)`: every buffer receives the sum (times 1/N for `average`).
/// - `reduce_range(root, begin, end, op)`: `reduce` of elements [begin, end) only. Calls on
///   disjoint ranges may run at once from several threads (a bucket of gradients is reduced by
///   whichever participant finishes it last); the other operations run one at a time.
/// - `participants()` and `size()` (elements per buffer); `value_type`, a `reducible` type.
/// Every operation blocks until its result is in place, and throws `crema::collective_error`
/// (or a subclass's native error) naming the participant or range at fault.
template <class Collective>
concept tree_collective = reducible<typename Collective::value_type> &&
    requires(Collective& collective, const Collective& const_collective, std::size_t root,
             std::size_t begin, std::size_t end, reduction op) {
  { const_collective.participants() } -> std::same_as<std::size_t>;
  { const_collective.size() } -> std::same_as<std::size_t>;
  collective.broadcast(root);
  collective.reduce(root, op);
  collective.allreduce(op);
  collective.reduce_range(root, begin, end, op);
};

/// @brief Whether a model's `reduce_range` calls must come in one order on every participant:
/// true where a model says so with `static constexpr bool ranges_in_order = true` (the MPI
/// reducer: ranks finish buckets in different orders, and MPI matches collectives by their
/// order), false otherwise. `p2p_sync` then reduces buckets in index order on a thread of its own.
template <class Collective>
inline constexpr bool ranges_in_order_v = [] {
  if constexpr (requires { Collective::ranges_in_order; }) {
    return static_cast<bool>(Collective::ranges_in_order);
  } else {
    return false;
  }
}();

}  // namespace crema
