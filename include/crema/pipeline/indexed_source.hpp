#pragma once

#include <crema/core/error.hpp>
#include <crema/pipeline/source.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace crema {

/// @brief A permutation of [0, size) chosen by a key: a four-round Feistel network over the
/// smallest even number of bits that covers `size`, applied again while the result falls outside
/// (cycle walking). Exact (a bijection), O(1) memory, a few hashes per index (at most four
/// walks are expected, since the network's domain is less than four times `size`).
/// Immutable; every member is thread-safe and never allocates.
class keyed_permutation {
 public:
  /// @param size the number of indices permuted
  /// @param key  chooses the permutation; the same key gives the same one everywhere
  keyed_permutation(std::uint64_t size, std::uint64_t key) noexcept : size_(size) {
    unsigned bits = 2;
    while (bits < 64 && (std::uint64_t{1} << bits) < size) bits += 2;
    half_bits_ = bits / 2;
    half_mask_ = (std::uint64_t{1} << half_bits_) - 1;
    for (std::size_t round = 0; round < rounds; ++round) {
      key = mix(key + 0x9e3779b97f4a7c15ULL);
      round_keys_[round] = key;
    }
  }

  /// @return the index `index` is sent to; `index` must be below `size()`
  [[nodiscard]] std::uint64_t operator()(std::uint64_t index) const noexcept {
    do {
      index = encrypt(index);
    } while (index >= size_);
    return index;
  }
  /// @return the number of indices
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }

 private:
  static constexpr std::size_t rounds = 4;

  static constexpr std::uint64_t mix(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  [[nodiscard]] std::uint64_t encrypt(std::uint64_t value) const noexcept {
    std::uint64_t left = value >> half_bits_;
    std::uint64_t right = value & half_mask_;
    for (const std::uint64_t round_key : round_keys_) {
      const std::uint64_t next = left ^ (mix(right ^ round_key) & half_mask_);
      left = right;
      right = next;
    }
    return (left << half_bits_) | right;
  }

  std::uint64_t size_;
  unsigned half_bits_ = 1;
  std::uint64_t half_mask_ = 1;
  std::uint64_t round_keys_[rounds] = {};
};

/// @brief The order of pass `epoch` over `size` records for `seed`: what every shuffling crema
/// source uses, so that the ranks of a job, each with its own shard, agree on it.
[[nodiscard]] inline keyed_permutation epoch_permutation(std::uint64_t size, std::uint64_t seed,
                                                         std::uint64_t epoch) noexcept {
  return keyed_permutation(size, seed ^ (epoch * 0xd1b54a32d192ed03ULL));
}

/// @brief A source made from two things a user has: how many records there are, and how to get
/// record `i` (what a PyTorch map-style dataset asks of its user). Sharding, positions, seeking
/// and an exact shuffle come from crema.
///
/// `at(i)` is called once per record read, from one thread at a time. With `shuffle(seed)`, each
/// pass visits the records in an order that is a permutation keyed by (seed, epoch): every record
/// exactly once per pass, another order every pass, the same orders on every run and on every
/// rank (so shards stay disjoint and complete in every pass). The first pass is epoch 0 and each
/// `rewind()` starts the next; `set_epoch` restores a saved one.
/// @tparam Record what `at` returns; held by value until the next record is read
template <class Record>
class indexed_source {
 public:
  using record_type = Record;
  static constexpr bool records_are_stable = false;

  /// @param size the number of records
  /// @param at   `Record(std::size_t index)` for every index below `size`
  /// @param name names the data for `key()` ("indexed:<name>")
  template <class At>
  requires std::is_invocable_r_v<Record, At&, std::size_t> indexed_source(
      std::size_t size, At at, std::string name = "indexed")
      : at_(std::move(at)), name_(std::move(name)), size_(size) {}

  /// @brief Visits the records in a permutation keyed by (seed, epoch) from now on; rewinds
  /// the current pass.
  indexed_source& shuffle(std::uint64_t seed) {
    seed_ = seed;
    position_ = 0;
    return *this;
  }

  [[nodiscard]] const Record* next() {
    if (position_ >= shard_size()) return nullptr;
    current_.reset();  // at() may throw: no stale record stays behind
    current_.emplace(at_(static_cast<std::size_t>(index_at(position_))));
    ++position_;
    return &*current_;
  }
  void rewind() {
    ++epoch_;
    position_ = 0;
  }
  void shard(std::size_t rank, std::size_t world) {
    detail::check_shard(rank, world);
    rank_ = rank;
    world_ = world;
    position_ = 0;
  }
  [[nodiscard]] record_position position() const noexcept { return position_; }
  /// @throws crema::config_error if `position` is past the end of this shard's pass
  void seek(record_position position) {
    if (position > shard_size()) {
      detail::fail<config_error>(
          "indexed_source: position {} is past the end of {} (shard {} of {} holds {} records)",
          position, key(), rank_, world_, shard_size());
    }
    position_ = position;
  }
  [[nodiscard]] std::string key() const { return "indexed:" + name_; }

  /// @return the pass being read (0 for the first)
  [[nodiscard]] std::uint64_t epoch() const noexcept { return epoch_; }
  /// @brief Makes `epoch` the pass being read (its order, when shuffled), from its start.
  void set_epoch(std::uint64_t epoch) noexcept {
    epoch_ = epoch;
    position_ = 0;
  }
  /// @return the number of records this shard yields in one pass
  [[nodiscard]] std::size_t shard_size() const noexcept {
    return size_ > rank_ ? (size_ - rank_ + world_ - 1) / world_ : 0;
  }
  /// @return the index (into `at`) of the record at `position` of this shard's current pass
  [[nodiscard]] std::uint64_t index_at(record_position position) const noexcept {
    const std::uint64_t in_pass = rank_ + position * world_;
    if (!seed_) return in_pass;
    return epoch_permutation(size_, *seed_, epoch_)(in_pass);
  }

 private:
  std::function<Record(std::size_t)> at_;
  std::string name_;
  std::size_t size_;
  std::size_t rank_ = 0;
  std::size_t world_ = 1;
  record_position position_ = 0;
  std::uint64_t epoch_ = 0;
  std::optional<std::uint64_t> seed_;
  std::optional<Record> current_;
};

static_assert(record_source<indexed_source<int>>);

}  // namespace crema
