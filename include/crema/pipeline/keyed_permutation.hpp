#pragma once

#include <cstddef>
#include <cstdint>

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

}  // namespace crema
