#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

// The weights of one axis of Pillow's resampling, as band_resampler's passes take them.

namespace crema::detail {

// One axis's weights: for each output index, the first input index and the weights from there.
struct resample_axis {
  static constexpr int precision_bits = 32 - 8 - 2;  // Pillow's

  std::vector<std::size_t> first;     // per output index
  std::vector<std::size_t> count;     // taps per output index
  std::vector<std::int32_t> weights;  // taps_per_output per output index, fixed point
  std::vector<double> scratch;
  std::size_t taps_per_output = 0;
  // For 8 outputs at a time (the AVX2 horizontal pass): per block of 8, the most taps any of
  // them has, and the weights tap by tap, 8 outputs side by side; the first inputs as int32.
  std::vector<std::int32_t> block_weights;
  std::vector<std::int32_t> block_taps;
  std::vector<std::int32_t> first32;

  void make_blocks() {
    const std::size_t outputs = first.size();
    const std::size_t blocks = outputs / 8;
    block_weights.resize(blocks * taps_per_output * 8);
    block_taps.resize(blocks);
    first32.resize(outputs);
    for (std::size_t out = 0; out < outputs; ++out)
      first32[out] = static_cast<std::int32_t>(first[out]);
    for (std::size_t block = 0; block < blocks; ++block) {
      std::size_t most = 0;
      for (std::size_t lane = 0; lane < 8; ++lane) most = std::max(most, count[block * 8 + lane]);
      block_taps[block] = static_cast<std::int32_t>(most);
      for (std::size_t tap = 0; tap < taps_per_output; ++tap) {
        for (std::size_t lane = 0; lane < 8; ++lane) {
          block_weights[(block * taps_per_output + tap) * 8 + lane] =
              weights[(block * 8 + lane) * taps_per_output + tap];
        }
      }
    }
  }

  // For the AVX2 horizontal pass on channel planes: per block of 8 outputs, the first input of
  // lanes 0-3 and of lanes 4-7 (each half reads 16 bytes from there), and per pair of taps a byte
  // shuffle that puts each lane's two inputs side by side as 16-bit values, with the two taps'
  // weights split into their high and low 11 bits (so that 16-bit multiply-adds sum exactly
  // what the 32-bit products sum). A block whose inputs do not fit its halves' 16 bytes has no
  // pairs (`shuffle_pairs` 0) and goes the gather way.
  std::size_t pairs_per_block = 0;
  std::vector<std::int32_t> shuffle_pairs;
  std::vector<std::int32_t> shuffle_bases;  // 2 per block
  std::vector<std::uint8_t> shuffle_masks;  // 32 bytes per pair
  std::vector<std::int32_t> shuffle_high;   // 8 per pair: two 16-bit weights per lane
  std::vector<std::int32_t> shuffle_low;

  static constexpr int low_bits = 11;

  void make_shuffles() {
    const std::size_t blocks = first.size() / 8;
    pairs_per_block = (taps_per_output + 1) / 2;
    shuffle_pairs.assign(blocks, 0);
    shuffle_bases.assign(blocks * 2, 0);
    shuffle_masks.assign(blocks * pairs_per_block * 32, 0x80);
    shuffle_high.assign(blocks * pairs_per_block * 8, 0);
    shuffle_low.assign(blocks * pairs_per_block * 8, 0);
    for (std::size_t block = 0; block < blocks; ++block) {
      const std::size_t base[2] = {first[block * 8], first[block * 8 + 4]};
      bool fits = true;
      std::size_t most = 0;
      for (std::size_t lane = 0; lane < 8; ++lane) {
        const std::size_t out = block * 8 + lane;
        most = std::max(most, count[out]);
        if (count[out] > 0 && first[out] + count[out] - 1 - base[lane / 4] > 15) fits = false;
      }
      if (!fits) continue;
      const std::size_t pairs = (most + 1) / 2;
      shuffle_pairs[block] = static_cast<std::int32_t>(pairs);
      shuffle_bases[block * 2] = static_cast<std::int32_t>(base[0]);
      shuffle_bases[block * 2 + 1] = static_cast<std::int32_t>(base[1]);
      for (std::size_t pair = 0; pair < pairs; ++pair) {
        const std::size_t at = block * pairs_per_block + pair;
        for (std::size_t lane = 0; lane < 8; ++lane) {
          const std::size_t out = block * 8 + lane;
          std::uint32_t high = 0;
          std::uint32_t low = 0;
          for (std::size_t half = 0; half < 2; ++half) {
            const std::size_t tap = pair * 2 + half;
            if (tap >= count[out]) continue;  // no input, no weight: the lane's value is 0
            const auto weight = static_cast<std::uint32_t>(weights[out * taps_per_output + tap]);
            shuffle_masks[at * 32 + (lane / 4) * 16 + (lane % 4) * 4 + half * 2] =
                static_cast<std::uint8_t>(first[out] + tap - base[lane / 4]);
            high |= (weight >> low_bits) << (16 * half);
            low |= (weight & ((1U << low_bits) - 1)) << (16 * half);
          }
          shuffle_high[at * 8 + lane] = static_cast<std::int32_t>(high);
          shuffle_low[at * 8 + lane] = static_cast<std::int32_t>(low);
        }
      }
    }
  }

  // Pillow's precompute_coeffs with the bilinear filter, then normalize_coeffs_8bpc.
  void compute(std::size_t in_size, double in0, double in1, std::size_t out_size) {
    const double scale = (in1 - in0) / static_cast<double>(out_size);
    const double filter_scale = std::max(scale, 1.0);
    const double support = 1.0 * filter_scale;
    taps_per_output = static_cast<std::size_t>(std::ceil(support)) * 2 + 1;
    first.resize(out_size);
    count.resize(out_size);
    weights.resize(out_size * taps_per_output);
    scratch.resize(taps_per_output);
    const double inverse = 1.0 / filter_scale;
    for (std::size_t out = 0; out < out_size; ++out) {
      const double center = in0 + (static_cast<double>(out) + 0.5) * scale;
      long low = static_cast<long>(center - support + 0.5);
      if (low < 0) low = 0;
      long high = static_cast<long>(center + support + 0.5);
      if (high > static_cast<long>(in_size)) high = static_cast<long>(in_size);
      const std::size_t taps = high > low ? static_cast<std::size_t>(high - low) : 0;
      double total = 0;
      for (std::size_t x = 0; x < taps; ++x) {
        double at = (static_cast<double>(x) + static_cast<double>(low) - center + 0.5) * inverse;
        if (at < 0) at = -at;
        const double weight = at < 1.0 ? 1.0 - at : 0.0;
        scratch[x] = weight;
        total += weight;
      }
      std::int32_t* out_weights = weights.data() + out * taps_per_output;
      for (std::size_t x = 0; x < taps_per_output; ++x) {
        double weight = x < taps ? scratch[x] : 0.0;
        if (x < taps && total != 0.0) weight /= total;
        const double fixed = weight * static_cast<double>(1 << precision_bits);
        out_weights[x] = static_cast<std::int32_t>(weight < 0 ? fixed - 0.5 : fixed + 0.5);
      }
      first[out] = static_cast<std::size_t>(low);
      count[out] = taps;
    }
  }
};

// Whether resampling the box [start, start + extent) of `size` pixels to `out` pixels changes
// the values: Pillow skips a pass that does not.
[[nodiscard]] inline bool pass_changes(std::size_t size, double start, double extent,
                                       std::size_t out) noexcept {
  return out != size || start != 0 || extent != static_cast<double>(size);
}

[[nodiscard]] inline std::uint8_t clip8(std::int32_t value) noexcept {
  constexpr int bits = resample_axis::precision_bits;
  if (value >= (std::int32_t{1} << bits << 8)) return 255;
  if (value <= 0) return 0;
  return static_cast<std::uint8_t>(value >> bits);
}

}  // namespace crema::detail
