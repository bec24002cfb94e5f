#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/fmt.hpp>
#include <crema/core/detail/library_inline.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace crema {

/// @brief One consumer's part of a `pipeline_stats` snapshot.
struct consumer_stats {
  std::uint64_t batches_consumed = 0;  ///< batches this consumer took
  /// full batches waiting for it now, those an ordered consumer took ahead of their turn too
  std::size_t queued_batches = 0;
  std::size_t leased_batches = 0;      ///< batches it holds leases on now
  std::size_t free_slots = 0;          ///< its slots free for producers now
  std::size_t waiting_producers = 0;   ///< producers suspended for one of its slots now
  bool pulling = false;                ///< whether it is waiting in a pull now
  std::uint64_t producer_wakeups = 0;  ///< its releases and pulls that resumed producers
};

/// @brief A snapshot of what a pipeline has done since it started.
struct pipeline_stats {
  std::uint64_t batches_produced = 0;         ///< batches producers handed to consumers
  std::uint64_t records_produced = 0;         ///< records in those batches
  std::uint64_t batches_consumed = 0;         ///< batches consumers took
  std::uint64_t epochs = 0;                   ///< passes over the source begun after the first
  std::chrono::nanoseconds consumer_wait{0};  ///< consumers waiting for a batch (starvation)
  /// producers suspended for a free slot (backpressure)
  std::chrono::nanoseconds producer_wait{0};
  std::uint64_t producer_suspensions = 0;  ///< times a producer was suspended for a slot
  std::vector<std::uint64_t> suspensions_by_producer;  ///< the same, per producer
  /// Consumers' releases and pulls that resumed producers waiting for a slot: each wakes a
  /// sleeping thread where the producers' threads sleep, a system call on the consumer's thread.
  /// Rare while the consumers keep coming back: an idle producer thread then polls for the slots
  /// they released.
  std::uint64_t producer_wakeups = 0;
  /// Batches a producer wrote into the slot it had handed on last, waiting a few microseconds for
  /// its consumer to give it back rather than taking one written longer ago: where batches are
  /// larger than a core's cache, what keeps their stores in it (only for slots the host alone
  /// uses, and only where a fill takes long beside the wait).
  std::uint64_t warm_refills = 0;
  std::size_t queued_batches = 0;         ///< full batches waiting for their consumer now
  std::size_t free_slots = 0;             ///< slots free for producers now
  std::size_t waiting_producers = 0;      ///< producers suspended for a free slot now
  std::vector<consumer_stats> consumers;  ///< per consumer, by index
  /// A consumer that holds the others back now: a consumer is waiting in a pull while every
  /// running producer waits for a free slot of this one (it stopped pulling, or holds its leases).
  std::optional<std::size_t> held_back_by;
};

namespace detail {
/// `pipeline_stats` in one line, as its formatter writes it.
[[nodiscard]] std::string describe(const pipeline_stats& stats);
}  // namespace detail

}  // namespace crema

/// One line: `produced 120 batches (7680 records), consumed 118, epochs 1, queued 2, free 6,
/// waiting producers 0, consumer wait 1.2 ms, producer wait 40.1 ms (55 suspensions, 3 woken by
/// consumers)`, then `, 40 refilled warm` when producers waited for slots coming back (see
/// `warm_refills`) and `, held back by consumer 1` when one is.
template <>
struct fmt::formatter<crema::pipeline_stats> {
  constexpr auto parse(format_parse_context& context) { return context.begin(); }
  template <class FormatContext>
  auto format(const crema::pipeline_stats& stats, FormatContext& context) const {
    // Formatted to a string first, out of line: {fmt}'s core formats through the functions
    // compiled in its library, which format_to into an arbitrary context would instantiate here
    // again.
    const std::string line = crema::detail::describe(stats);
    return std::copy(line.begin(), line.end(), context.out());
  }
};

#if CREMA_CORE_IN_HEADERS
#include <crema/pipeline/detail/stats_impl.hpp>
#endif
