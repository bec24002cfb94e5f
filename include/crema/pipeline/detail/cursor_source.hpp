#pragma once

#include <crema/pipeline/shard_cursor.hpp>
#include <crema/pipeline/source.hpp>

#include <cstddef>
#include <cstdint>

namespace crema::detail {

/// @brief The members of `record_source` that an indexed source answers from its `shard_cursor`
/// alone (rewind, shard, position, seek, epochs, shuffle), written once for every source that
/// reads record `cursor_.next_index()` in `next()`: `vector_source`, `indexed_source` and the
/// image sources. `Derived` gives `key()` and a `static constexpr source_name` for errors.
/// Not thread-safe (a source is used by one thread at a time); nothing here allocates but `seek`'s
/// error.
template <class Derived>
class cursor_source {
 public:
  /// @brief Visits the records in a permutation keyed by (seed, epoch) from now on; the pass
  /// starts again.
  Derived& shuffle(std::uint64_t seed) noexcept {
    cursor_.shuffle(seed);
    return static_cast<Derived&>(*this);
  }
  /// @brief Starts the next pass (the next epoch's order, when shuffled).
  void rewind() noexcept { cursor_.rewind(); }
  /// @brief Keeps the records whose ordinal is `rank` modulo `world`; the pass starts again.
  /// @throws crema::config_error if `world` is 0 or `rank` is not below it
  void shard(std::size_t rank, std::size_t world) { cursor_.shard(rank, world); }
  /// @brief Gives every rank of the world the same number of records per pass (`shard_balance`);
  /// the pass starts again.
  void balance(shard_balance balance) noexcept { cursor_.balance(balance); }
  /// @return the next record's position in this shard's pass
  [[nodiscard]] record_position position() const noexcept { return cursor_.position(); }
  /// @throws crema::config_error if `position` is past the end of this shard's pass
  void seek(record_position position) {
    cursor_.seek(position, Derived::source_name, static_cast<const Derived&>(*this).key());
  }
  /// @return the pass being read (0 for the first)
  [[nodiscard]] std::uint64_t epoch() const noexcept { return cursor_.epoch(); }
  /// @brief Makes `epoch` the pass being read (its order, when shuffled), from its start.
  void set_epoch(std::uint64_t epoch) noexcept { cursor_.set_epoch(epoch); }
  /// @return where the source stands (shard, epoch, position, shuffle)
  [[nodiscard]] const shard_cursor& cursor() const noexcept { return cursor_; }

 protected:
  explicit cursor_source(std::uint64_t records) noexcept : cursor_(records) {}

  shard_cursor cursor_;
};

}  // namespace crema::detail
