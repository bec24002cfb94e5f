#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/pipeline/source.hpp>
#include <crema/pipeline/source_registry.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>

namespace crema {

/// @brief What a pipeline does at the end of the source.
enum class pipeline_mode {
  repeat,       ///< training: rewind and go on, forever
  single_pass,  ///< evaluation: every record once across all consumers, then each range ends
};

/// @brief What a single pass does with its last batch when the records run out before it is
/// full.
enum class partial_batch {
  keep,  ///< hand it on short (`size()` below the batch size)
  drop,  ///< drop its records: every batch handed on is full
  /// fill it up with its own first records again, in order (each with its own origin, so the
  /// same augmentations); `padding()` says how many records at its end are repeats
  pad,
};

/// @brief Where a pipeline stands: the first batch no consumer has been given yet. A small value
/// to save with the model at a checkpoint (`double_buffered_pipeline::position()`) and give back
/// as `pipeline_options::resume_from`: the resumed pipeline delivers the batches the stopped one
/// would have delivered next, records, augmentations and batch numbers included. Records the
/// producers had read ahead are read again.
struct pipeline_position {
  /// its number among all the pipeline's batches (batch g goes to consumer g mod `consumers`,
  /// as that consumer's batch g / `consumers`): the batches before it were delivered
  std::uint64_t batch = 0;
  std::uint64_t epoch = 0;       ///< the pass over the source its first record belongs to
  record_position position = 0;  ///< its first record's position in that pass

  friend bool operator==(const pipeline_position&, const pipeline_position&) = default;
};

/// @brief How a pipeline is built. Every count must be at least 1, and the slots they add up to
/// must fit in this machine's memory.
struct pipeline_options {
  std::size_t batch_size = 1;  ///< records per batch (1 moves single records, as Caffe's reader)
  /// Preallocated batch slots per consumer. 0 (the default): enough for every batch being filled
  /// to have one while each consumer holds one and has one more waiting, `max(4,
  /// ceil(min(producers, threads) / consumers) + 2)`; a producer fills a whole batch in its slot,
  /// so with fewer slots than busy producers the others wait and their threads idle. `options()`
  /// gives the count chosen.
  std::size_t prefetch = 0;
  std::size_t producers = 1;  ///< producer coroutines (each with its own copy of the transform)
  std::size_t threads = 1;    ///< threads the producers run on (may be fewer than producers)
  std::size_t consumers = 1;  ///< consumers, one per device or solver; batches are dealt in turn
  pipeline_mode mode = pipeline_mode::repeat;
  /// The last batch of a pass when the records run out before it is full: in single-pass mode,
  /// and in repeat mode with `batches_end_with_pass`.
  partial_batch last_batch = partial_batch::keep;
  /// Repeat mode: every pass ends its last batch, short, dropped or padded as `last_batch` says,
  /// and the next pass starts a batch of its own, so that no batch holds records of two passes
  /// and every pass makes the same batches (`ceil(records / batch_size)`, or `floor` when
  /// dropped). What a training loop that counts epochs needs: an epoch is a whole number of
  /// batches. Off: batches run on across passes, every one full.
  bool batches_end_with_pass = false;
  bool ordered = false;  ///< each consumer sees its batches in source order, whatever the producers
  source_registry* registry = nullptr;  ///< share one reader with pipelines of the same source key
  /// Keys every record's `sample_context::rng()` with the record's epoch and position: the same
  /// seed gives the same augmentations whatever the producer, thread and consumer counts.
  std::uint64_t seed = 0;
  /// How long a blocking `pull()` waits while another consumer holds it back (every producer
  /// waits for that consumer's slots) before it throws a `pipeline_error` naming that consumer.
  /// `std::chrono::milliseconds::max()` waits for ever.
  std::chrono::milliseconds stall_timeout{std::chrono::seconds(60)};
  /// How long a producer may be busy with one record (reading it from the source, transforming
  /// it, or finishing its batch) before a blocking `pull()` that waits for it throws a
  /// `pipeline_error` naming the producer, the record and what it was doing.
  /// `std::chrono::milliseconds::max()` never looks.
  std::chrono::milliseconds hang_timeout{std::chrono::seconds(60)};
  /// The longest a producer waits, before it takes a slot, for its consumer to give back the
  /// slot it handed on last, so as to refill it while its memory is in the cache (and never
  /// more than an eighth of the shortest of the producer's last four fills; none under 10 µs).
  /// Zero: producers take the next free slot at once.
  std::chrono::microseconds warm_refill_wait{200};
  /// Starts where a stopped pipeline's `position()` said it stood, rather than where the source
  /// stands: the source's pass is set (`set_epoch`, for a source that has one: its own epoch
  /// plus the position's) and sought to the position, the pass counter that keys the
  /// augmentations starts at the position's epoch, and batch numbers go on from its batch. Build
  /// the source as for the stopped run (the same shard, shuffle and seed); a source without
  /// `set_epoch` must visit every pass in the same order. Not with a `registry`: a shared reader
  /// is positioned by its first pipeline.
  std::optional<pipeline_position> resume_from = std::nullopt;
};

/// @brief How a pull with a deadline ended.
enum class pull_status {
  ready,    ///< a batch was delivered
  end,      ///< a single pass is over for this consumer
  stopped,  ///< the pipeline was stopped (or destroyed)
  timeout,  ///< the deadline passed first (`pipeline_stats::held_back_by` may say why)
};

/// @return the status's name, for messages
[[nodiscard]] constexpr const char* to_string(pull_status status) noexcept {
  switch (status) {
    case pull_status::ready:
      return "ready";
    case pull_status::end:
      return "end";
    case pull_status::stopped:
      return "stopped";
    case pull_status::timeout:
      return "timeout";
  }
  return "?";
}

/// @brief What `pull_for` and `pull_until` return: how the pull ended, and the batch if one came.
template <class Lease>
struct pull_result {
  pull_status status = pull_status::timeout;
  Lease batch;  ///< holds a batch exactly when `status` is `ready`

  /// @return whether a batch was delivered
  explicit operator bool() const noexcept { return status == pull_status::ready; }
};

}  // namespace crema
