#pragma once

#include <crema/core/error.hpp>
#include <crema/pipeline/keyed_permutation.hpp>
#include <crema/pipeline/source.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

namespace crema {

/// @brief Whether every rank of a world reads as many records per pass as the others. Without
/// it, the first `records % world` ranks read one record more than the rest, and a
/// data-parallel job whose ranks must take the same number of steps (PyTorch's DDP, any
/// allreduce per step) waits for ever on the short ones.
enum class shard_balance {
  none,  ///< rank r reads the ordinals r, r + w, ... below the record count (the default)
  /// every rank reads `ceil(records / world)`: the ranks one short read the pass's first
  /// ordinals again (ordinal o past the end is o - records), as PyTorch's DistributedSampler
  /// pads; every record is read, a few twice
  pad,
  /// every rank reads `floor(records / world)`: the ranks with one more leave out their last;
  /// every record read is read once, the last `records % world` of the pass are not read
  drop,
};

/// @brief Where an indexed source stands: which of `records` records comes next for rank `r` of
/// `w`, in which pass (epoch), in order or shuffled. The bookkeeping every crema source over
/// numbered records shares (`vector_source`, `indexed_source`, `lmdb_source`, the image
/// sources), written once so that they shard, shuffle, seek and count epochs alike.
///
/// The records of a pass are numbered by their ordinal `o` in the pass order: rank `r` of `w`
/// keeps the ordinals `o = r + p * w` (position `p` in its shard), so the shards of a world are
/// disjoint and together hold every record. Unshuffled, record `o` of the data is ordinal `o`;
/// shuffled with `seed`, it is `epoch_permutation(records, seed, epoch)(o)`: every record once per
/// pass, another order each pass, the same on every rank and run, so the shards stay disjoint and
/// complete in every pass.
///
/// A value type: copy it to save where a source stands. Not thread-safe (a source is used by one
/// thread at a time); no member allocates; only `shard` and `seek` throw.
class shard_cursor {
 public:
  /// @param records the records of the whole data (every shard's)
  explicit shard_cursor(std::uint64_t records = 0) noexcept : records_(records) {}

  /// @brief Keeps the records whose ordinal is `rank` modulo `world`; the pass starts again.
  /// @throws crema::config_error if `world` is 0 or `rank` is not below it
  void shard(std::size_t rank, std::size_t world) {
    detail::check_shard(rank, world);
    rank_ = rank;
    world_ = world;
    position_ = 0;
  }
  /// @brief Gives every rank of the world the same number of records per pass (or not, with
  /// `shard_balance::none`, the default); the pass starts again.
  void balance(shard_balance balance) noexcept {
    balance_ = balance;
    position_ = 0;
  }
  /// @brief Visits the records in the permutation keyed by (`seed`, epoch) from now on (or in
  /// order, given nothing); the pass starts again.
  void shuffle(std::optional<std::uint64_t> seed) noexcept {
    seed_ = seed;
    position_ = 0;
    remake_permutation();
  }
  /// @brief Starts the next pass.
  void rewind() noexcept { set_epoch(epoch_ + 1); }
  /// @brief Makes `epoch` the pass being read (its order, when shuffled), from its start.
  void set_epoch(std::uint64_t epoch) noexcept {
    epoch_ = epoch;
    position_ = 0;
    remake_permutation();
  }
  /// @brief Goes back to the start of the pass being read (same epoch, same order).
  void restart() noexcept { position_ = 0; }
  /// @brief Makes `position` the next record of this shard's pass.
  /// @param who, key name the source in the error ("lmdb_source", "lmdb:/data/train")
  /// @throws crema::config_error naming the position, the source and the shard if `position` is
  ///         past the end of the pass (never a wrapped index)
  void seek(record_position position, std::string_view who, std::string_view key) {
    if (position > size()) {
      detail::fail<config_error>(
          "{}: position {} is past the end of {} (shard {} of {} holds {} records)", who, position,
          key, rank_, world_, size());
    }
    position_ = position;
  }
  /// @return the index in the whole data of the next record
  /// @pre `!exhausted()`
  [[nodiscard]] std::uint64_t next_index() const noexcept { return index_at(position_); }
  /// @brief Moves past the next record (once the source has it: a read that throws leaves the
  /// cursor where it was, so the record is read again, not lost).
  /// @pre `!exhausted()`
  void advance() noexcept { ++position_; }

  /// @return the index in the whole data of the record at `position` of this shard's pass
  [[nodiscard]] std::uint64_t index_at(record_position position) const noexcept {
    const std::uint64_t ordinal = ordinal_at(position);
    return permutation_ ? (*permutation_)(ordinal) : ordinal;
  }
  /// @return the ordinal in the pass order (before any shuffle) of the record at `position`
  /// (with `shard_balance::pad`, an ordinal past the last is read as the pass's first again)
  [[nodiscard]] std::uint64_t ordinal_at(record_position position) const noexcept {
    const std::uint64_t ordinal = rank_ + position * world_;
    return ordinal < records_ ? ordinal : ordinal % records_;
  }
  /// @return the next record's position in this shard's pass
  [[nodiscard]] record_position position() const noexcept { return position_; }
  /// @return whether the pass has no record left
  [[nodiscard]] bool exhausted() const noexcept { return position_ >= size(); }
  /// @return the records this shard yields in one pass
  [[nodiscard]] std::uint64_t size() const noexcept {
    switch (balance_) {
      case shard_balance::pad:
        return (records_ + world_ - 1) / world_;
      case shard_balance::drop:
        return records_ / world_;
      case shard_balance::none:
        break;
    }
    return records_ > rank_ ? (records_ - rank_ + world_ - 1) / world_ : 0;
  }
  /// @return the records of the whole data
  [[nodiscard]] std::uint64_t records() const noexcept { return records_; }
  /// @return the pass being read (0 for the first)
  [[nodiscard]] std::uint64_t epoch() const noexcept { return epoch_; }
  /// @return the seed of the shuffle, or nothing when the records are read in order
  [[nodiscard]] std::optional<std::uint64_t> seed() const noexcept { return seed_; }
  [[nodiscard]] std::size_t rank() const noexcept { return rank_; }
  [[nodiscard]] std::size_t world() const noexcept { return world_; }
  /// @return whether the ranks read as many records as each other, and how
  [[nodiscard]] shard_balance balanced() const noexcept { return balance_; }

 private:
  // The pass's permutation is made once per epoch, not once per record.
  void remake_permutation() noexcept {
    permutation_.reset();
    if (seed_) permutation_.emplace(epoch_permutation(records_, *seed_, epoch_));
  }

  std::uint64_t records_;
  std::size_t rank_ = 0;
  std::size_t world_ = 1;
  shard_balance balance_ = shard_balance::none;
  record_position position_ = 0;
  std::uint64_t epoch_ = 0;
  std::optional<std::uint64_t> seed_;
  std::optional<keyed_permutation> permutation_;
};

/// @brief Where each rank of a world of `world` ranks resumes a pass of which a job of another
/// world size read `consumed` records in whole global batches: `consumed / world`.
///
/// Ranks read their shards interleaved (rank r's p-th record is the pass's ordinal r + p x w), so
/// a job whose ranks each read `consumed / old_world` records read exactly the ordinals below
/// `consumed`, whatever its world. A job of `world` ranks that seeks every rank to the position
/// returned here reads exactly the ordinals from `consumed` on: together, each record of the pass
/// once, as MosaicML's Streaming resumes. `consumed` is a multiple of `world` when the global
/// batch is kept (old world x old batch = new world x new batch). The same seed and epoch give
/// the same permutation for every world size.
/// @throws crema::config_error naming both if `consumed` is not a multiple of `world`
[[nodiscard]] inline record_position resume_position(std::uint64_t consumed, std::size_t world) {
  if (world == 0 || consumed % world != 0) {
    detail::fail<config_error>(
        "resume_position: {} records read is not a whole number of records for each of {} ranks "
        "(keep the global batch: old ranks x old batch = new ranks x new batch)",
        consumed, world);
  }
  return consumed / world;
}

}  // namespace crema
