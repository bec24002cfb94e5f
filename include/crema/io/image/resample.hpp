#pragma once

#include <crema/core/detail/cpu_features.hpp>
#include <crema/core/error.hpp>
#include <crema/io/decode_plan.hpp>
#include <crema/io/detail/rgb_split.hpp>
#include <crema/io/image/detail/resample_axis.hpp>
#include <crema/io/image/detail/resample_isa.hpp>
#include <crema/io/image/image_geometry.hpp>
// `value_normalizer` moved to its own header; included here for one release, for code that
// found it here.
#include <crema/io/image/value_normalizer.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

// AVX2 where the processor has it, chosen at run time (core/detail/cpu_features.hpp).
#if defined(CREMA_X86_KERNELS)
#include <immintrin.h>
#endif

/// @file
/// Bilinear resampling of 8-bit images with antialiasing when shrinking: Pillow's algorithm (the
/// triangle filter widened by the shrink factor, weights normalised and held in 22-bit fixed
/// point, a horizontal pass to 8-bit rows, then a vertical pass), so that the same pixels and
/// box give Pillow's values. Fed by bands of rows as a decoder hands them over: each band is
/// resampled across while it is in the cache, and only the rows the vertical pass needs are
/// kept, at the output's width. Component `crema::image` (no dependency of its own).

namespace crema {

/// @brief Resamples a box of a decoded region to an output size, from bands of rows.
///
/// `start` once per image, `rows` for each band as it comes (top to bottom), then `finish`,
/// which hands each output row to a writer, channel by channel (all of channel 0's values, then
/// channel 1's, ...), mirrored left to right when asked. Its buffers grow to the largest
/// image and are then reused: nothing is allocated per image in the steady state. One per
/// thread; not thread-safe.
class band_resampler {
 public:
  /// @brief Prepares for one image.
  /// @param channels, height, width the decoded region's
  /// @param box the part of the region to resample (inside it)
  /// @param out_height, out_width the output size (at least 1 each)
  /// @param mirror whether output column x is made from the box's column out_width - 1 - x
  void start(std::size_t channels, std::size_t height, std::size_t width, resample_box box,
             std::size_t out_height, std::size_t out_width, bool mirror = false) {
    channels_ = channels;
    mirror_ = mirror;
    in_width_ = width;
    out_height_ = out_height;
    out_width_ = out_width;
    // As Pillow: a pass is skipped where it would leave the values as they are.
    need_horizontal_ = detail::pass_changes(width, box.left, box.width, out_width);
    need_vertical_ = detail::pass_changes(height, box.top, box.height, out_height);
    vertical_.compute(height, box.top, box.top + box.height, out_height);
    pair_weights_.resize(vertical_.taps_per_output + 1);
    isa_ = detail::resample_rows().load(std::memory_order_relaxed);
    if (need_horizontal_) {
      horizontal_.compute(width, box.left, box.left + box.width, out_width);
      if (isa_ == detail::resample_isa::avx2 && channels == 3) {
        horizontal_.make_blocks();
        horizontal_.make_shuffles();
        plane_stride_ = width + 32;  // a block's half reads 16 bytes from its first input
        planes_.resize(3 * plane_stride_);
      }
    }
    // The rows the vertical pass reads: only those are kept.
    first_row_ = vertical_.first.front();
    end_row_ = vertical_.first.back() + vertical_.count.back();
    if (!need_vertical_) {
      first_row_ = 0;
      end_row_ = height;
    }
    row_bytes_ = (need_horizontal_ ? out_width : width) * channels;
    kept_.resize((end_row_ - first_row_) * row_bytes_);
  }

  /// @brief Takes a band of the region's rows (resampled across now, while in the cache).
  void rows(const pixel_rows& band) {
    const std::size_t begin = std::max(band.first, first_row_);
    const std::size_t end = std::min(band.first + band.count, end_row_);
    for (std::size_t row = begin; row < end; ++row) {
      const std::uint8_t* in = band.row(row - band.first);
      std::uint8_t* out = kept_.data() + (row - first_row_) * row_bytes_;
      if (!need_horizontal_) {
        for (std::size_t x = 0; x < in_width_; ++x) {
          for (std::size_t c = 0; c < channels_; ++c)
            out[c * in_width_ + column(x)] = in[x * channels_ + c];
        }
      } else if (channels_ == 3) {
#if defined(CREMA_X86_KERNELS)
        if (isa_ == detail::resample_isa::avx2) {
          across_rgb_avx2(in, out);
          continue;
        }
#endif
        across<3>(in, out, 0, out_width_);
      } else {
        across<1>(in, out, 0, out_width_);
      }
    }
  }

  /// @brief Makes the output, row by row: `write(row, values)` gets each output row's
  /// `out_width * channels` values, channel by channel, top to bottom.
  template <class Write>
  void finish(Write&& write) {
    if (!need_vertical_) {
      for (std::size_t row = 0; row < out_height_; ++row)
        write(row, kept_.data() + row * row_bytes_);
      return;
    }
    const std::size_t values = out_width_ * channels_;
    sums_.resize(values);
    out_row_.resize(values);
#if defined(CREMA_X86_KERNELS)
    if (isa_ == detail::resample_isa::avx2) {
      for (std::size_t row = 0; row < out_height_; ++row) {
        down_avx2(row, values);
        write(row, out_row_.data());
      }
      return;
    }
#endif
    for (std::size_t row = 0; row < out_height_; ++row) {
      std::fill(sums_.begin(), sums_.end(),
                std::int32_t{1} << (detail::resample_axis::precision_bits - 1));
      const std::size_t first = vertical_.first[row] - first_row_;
      const std::int32_t* weights = vertical_.weights.data() + row * vertical_.taps_per_output;
      for (std::size_t tap = 0; tap < vertical_.count[row]; ++tap) {
        const std::uint8_t* in = kept_.data() + (first + tap) * row_bytes_;
        const std::int32_t weight = weights[tap];
        for (std::size_t i = 0; i < values; ++i) sums_[i] += in[i] * weight;
      }
      for (std::size_t i = 0; i < values; ++i) out_row_[i] = detail::clip8(sums_[i]);
      write(row, out_row_.data());
    }
  }

 private:
  // Outputs [begin, end) of one row.
  template <std::size_t Channels>
  void across(const std::uint8_t* in, std::uint8_t* out, std::size_t begin,
              std::size_t end) const noexcept {
    const std::size_t taps_per_output = horizontal_.taps_per_output;
    for (std::size_t x = begin; x < end; ++x) {
      const std::uint8_t* source = in + horizontal_.first[x] * Channels;
      const std::int32_t* weights = horizontal_.weights.data() + x * taps_per_output;
      std::int32_t sums[Channels];
      for (std::size_t c = 0; c < Channels; ++c) {
        sums[c] = std::int32_t{1} << (detail::resample_axis::precision_bits - 1);
      }
      const std::size_t taps = horizontal_.count[x];
      for (std::size_t tap = 0; tap < taps; ++tap) {
        for (std::size_t c = 0; c < Channels; ++c)
          sums[c] += source[tap * Channels + c] * weights[tap];
      }
      const std::size_t to = column(x);
      for (std::size_t c = 0; c < Channels; ++c) out[c * out_width_ + to] = detail::clip8(sums[c]);
    }
  }

#if defined(CREMA_X86_KERNELS)
  // Pillow's clip8 on eight sums: the value, clamped to [0, 255].
  [[gnu::target("avx2")]] static __m256i clip8_avx2(__m256i sums) noexcept {
    return _mm256_min_epi32(
        _mm256_max_epi32(_mm256_srai_epi32(sums, detail::resample_axis::precision_bits),
                         _mm256_setzero_si256()),
        _mm256_set1_epi32(255));
  }

  // Sums of products taken with the weights' high and low bits apart, put together, with
  // Pillow's rounding added (not yet shifted down).
  [[gnu::target("avx2")]] static __m256i split_sums_avx2(__m256i high, __m256i low) noexcept {
    return _mm256_add_epi32(
        _mm256_add_epi32(_mm256_slli_epi32(high, detail::resample_axis::low_bits), low),
        _mm256_set1_epi32(std::int32_t{1} << (detail::resample_axis::precision_bits - 1)));
  }

  // One output row of the vertical pass, sixteen values at a time: a pair of taps' rows side by
  // side as 16-bit values, and two 16-bit multiply-adds with the weights' high and low bits (as
  // the horizontal pass), so the sums are Pillow's exactly; the values after the last sixteen
  // the plain way.
  [[gnu::target("avx2")]] void down_avx2(std::size_t row, std::size_t values) noexcept {
    constexpr int low_bits = detail::resample_axis::low_bits;
    const std::size_t first = vertical_.first[row] - first_row_;
    const std::size_t taps = vertical_.count[row];
    const std::int32_t* weights = vertical_.weights.data() + row * vertical_.taps_per_output;
    const std::int32_t half = std::int32_t{1} << (detail::resample_axis::precision_bits - 1);
    const std::uint8_t* rows = kept_.data() + first * row_bytes_;
    // The pairs' weights as the multiply-adds take them, made once for the row.
    for (std::size_t tap = 0; tap < taps; tap += 2) {
      const auto lower = static_cast<std::uint32_t>(weights[tap]);
      const auto upper = static_cast<std::uint32_t>(tap + 1 < taps ? weights[tap + 1] : 0);
      constexpr std::uint32_t low_mask = (1U << low_bits) - 1;
      pair_weights_[tap] =
          static_cast<std::int32_t>((lower >> low_bits) | ((upper >> low_bits) << 16));
      pair_weights_[tap + 1] =
          static_cast<std::int32_t>((lower & low_mask) | ((upper & low_mask) << 16));
    }
    std::size_t i = 0;
    for (; i + 16 <= values; i += 16) {
      __m256i high_first = _mm256_setzero_si256();   // values 0-3 and 8-11
      __m256i high_second = _mm256_setzero_si256();  // values 4-7 and 12-15
      __m256i low_first = _mm256_setzero_si256();
      __m256i low_second = _mm256_setzero_si256();
      for (std::size_t tap = 0; tap < taps; tap += 2) {
        // An odd last tap is paired with itself, at weight 0.
        const std::size_t next = tap + 1 < taps ? tap + 1 : tap;
        const __m256i high = _mm256_set1_epi32(pair_weights_[tap]);
        const __m256i low = _mm256_set1_epi32(pair_weights_[tap + 1]);
        const __m256i a = _mm256_cvtepu8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows + tap * row_bytes_ + i)));
        const __m256i b = _mm256_cvtepu8_epi16(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows + next * row_bytes_ + i)));
        const __m256i first_pairs = _mm256_unpacklo_epi16(a, b);
        const __m256i second_pairs = _mm256_unpackhi_epi16(a, b);
        high_first = _mm256_add_epi32(high_first, _mm256_madd_epi16(first_pairs, high));
        high_second = _mm256_add_epi32(high_second, _mm256_madd_epi16(second_pairs, high));
        low_first = _mm256_add_epi32(low_first, _mm256_madd_epi16(first_pairs, low));
        low_second = _mm256_add_epi32(low_second, _mm256_madd_epi16(second_pairs, low));
      }
      // Saturating packs clip to [0, 255] and put the sixteen values back in order.
      const __m256i words =
          _mm256_packus_epi32(_mm256_srai_epi32(split_sums_avx2(high_first, low_first),
                                                detail::resample_axis::precision_bits),
                              _mm256_srai_epi32(split_sums_avx2(high_second, low_second),
                                                detail::resample_axis::precision_bits));
      const __m256i bytes = _mm256_permute4x64_epi64(_mm256_packus_epi16(words, words), 0b1000);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out_row_.data() + i),
                       _mm256_castsi256_si128(bytes));
    }
    for (; i < values; ++i) {
      std::int32_t sum = half;
      for (std::size_t tap = 0; tap < taps; ++tap) sum += rows[tap * row_bytes_ + i] * weights[tap];
      out_row_[i] = detail::clip8(sum);
    }
  }

  // The row's pixels into three planes of bytes (`planes_`), eight pixels a step with byte
  // shuffles; nothing past the row's last pixel is read.
  [[gnu::target("avx2")]] void deinterleave_avx2(const std::uint8_t* in) noexcept {
    const detail::rgb_split split;
    std::uint8_t* planes[3] = {planes_.data(), planes_.data() + plane_stride_,
                               planes_.data() + 2 * plane_stride_};
    std::size_t w = 0;
    for (; w + 8 <= in_width_; w += 8) {
      __m128i channels[3];
      split(in + 3 * w, channels);
      for (std::size_t c = 0; c < 3; ++c) {
        _mm_storel_epi64(reinterpret_cast<__m128i*>(planes[c] + w), channels[c]);
      }
    }
    for (; w < in_width_; ++w) {
      for (std::size_t c = 0; c < 3; ++c) planes[c][w] = in[3 * w + c];
    }
  }

  // Block `block`'s eight sums of each channel (not yet clipped), from the planes: each half of a
  // register holds 16 bytes of a plane from its lanes' first input, a shuffle a pair of taps puts
  // each lane's two inputs side by side, and two 16-bit multiply-adds take the weights' high and
  // low bits; the sums are Pillow's exactly (every weight is at most 2^22, so nothing
  // overflows). A pair's shuffle and weights are loaded once for the three channels.
  [[gnu::target("avx2")]] void planar_block_avx2(std::size_t block,
                                                 __m256i (&sums)[3]) const noexcept {
    const detail::resample_axis& axis = horizontal_;
    __m256i values[3];
    __m256i high[3];
    __m256i low[3];
    for (std::size_t c = 0; c < 3; ++c) {
      const std::uint8_t* plane = planes_.data() + c * plane_stride_;
      values[c] = _mm256_loadu2_m128i(
          reinterpret_cast<const __m128i*>(plane + axis.shuffle_bases[block * 2 + 1]),
          reinterpret_cast<const __m128i*>(plane + axis.shuffle_bases[block * 2]));
      high[c] = _mm256_setzero_si256();
      low[c] = _mm256_setzero_si256();
    }
    const std::size_t pairs = static_cast<std::size_t>(axis.shuffle_pairs[block]);
    for (std::size_t pair = 0; pair < pairs; ++pair) {
      const std::size_t at = block * axis.pairs_per_block + pair;
      const __m256i mask =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&axis.shuffle_masks[at * 32]));
      const __m256i high_weights =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&axis.shuffle_high[at * 8]));
      const __m256i low_weights =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(&axis.shuffle_low[at * 8]));
      for (std::size_t c = 0; c < 3; ++c) {
        const __m256i inputs = _mm256_shuffle_epi8(values[c], mask);
        high[c] = _mm256_add_epi32(high[c], _mm256_madd_epi16(inputs, high_weights));
        low[c] = _mm256_add_epi32(low[c], _mm256_madd_epi16(inputs, low_weights));
      }
    }
    for (std::size_t c = 0; c < 3; ++c) sums[c] = split_sums_avx2(high[c], low[c]);
  }

  // Eight sums of each channel, clipped and packed into eight bytes (reversed when mirrored),
  // stored at once where outputs x .. x + 7 go.
  [[gnu::target("avx2")]] void store_block_avx2(__m256i red, __m256i green, __m256i blue,
                                                std::size_t x, std::uint8_t* out,
                                                __m256i reversed_eights) const noexcept {
    const __m256i red_green = _mm256_packus_epi32(clip8_avx2(red), clip8_avx2(green));
    const __m256i blues = clip8_avx2(blue);
    const __m256i bytes = _mm256_permutevar8x32_epi32(
        _mm256_packus_epi16(red_green, _mm256_packus_epi32(blues, blues)),
        _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));  // red 0-7, green 0-7, blue 0-7
    const __m256i ordered = mirror_ ? _mm256_shuffle_epi8(bytes, reversed_eights) : bytes;
    const std::size_t to = mirror_ ? out_width_ - 8 - x : x;
    const __m128i red_and_green = _mm256_castsi256_si128(ordered);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + to), red_and_green);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + out_width_ + to),
                     _mm_unpackhi_epi64(red_and_green, red_and_green));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + 2 * out_width_ + to),
                     _mm256_extracti128_si256(ordered, 1));
  }

  // Eight outputs at a time, Pillow's arithmetic exactly (32-bit products of the 22-bit weights):
  // for each tap, one gather fetches the 4 bytes that end with each output's input pixel (the
  // byte before it, then r, g, b), so nothing past the row's last pixel is read; a block whose
  // first input is pixel 0 goes the plain way, as do the outputs after the last whole block.
  [[gnu::target("avx2")]] void across_rgb_avx2(const std::uint8_t* in, std::uint8_t* out) noexcept {
    const detail::resample_axis& axis = horizontal_;
    const std::size_t blocks = out_width_ / 8;
    const __m256i last = _mm256_set1_epi32(static_cast<std::int32_t>(in_width_) - 1);
    const __m256i half =
        _mm256_set1_epi32(std::int32_t{1} << (detail::resample_axis::precision_bits - 1));
    const __m256i byte = _mm256_set1_epi32(0xff);
    const __m256i one = _mm256_set1_epi32(1);
    const int* base = reinterpret_cast<const int*>(in + 2);  // pixel p's bytes end at 3p - 1 + 3
    const __m256i reversed_eights =
        _mm256_setr_epi8(7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1,
                         0, 15, 14, 13, 12, 11, 10, 9, 8);
    deinterleave_avx2(in);
    for (std::size_t block = 0; block < blocks; ++block) {
      const std::size_t x = block * 8;
      if (axis.shuffle_pairs[block] > 0) {
        __m256i sums[3];
        planar_block_avx2(block, sums);
        store_block_avx2(sums[0], sums[1], sums[2], x, out, reversed_eights);
        continue;
      }
      if (axis.first[x] == 0) {
        across<3>(in, out, x, x + 8);
        continue;
      }
      const __m256i first =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(axis.first32.data() + x));
      const std::int32_t* weights = axis.block_weights.data() + block * axis.taps_per_output * 8;
      __m256i red = half;
      __m256i green = half;
      __m256i blue = half;
      const std::int32_t taps = axis.block_taps[block];
      for (std::int32_t tap = 0; tap < taps; ++tap) {
        const __m256i pixel = _mm256_sub_epi32(
            _mm256_min_epi32(_mm256_add_epi32(first, _mm256_set1_epi32(tap)), last), one);
        const __m256i offset = _mm256_add_epi32(pixel, _mm256_add_epi32(pixel, pixel));
        const __m256i values = _mm256_i32gather_epi32(base, offset, 1);
        const __m256i weight =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(weights + tap * 8));
        red = _mm256_add_epi32(
            red, _mm256_mullo_epi32(_mm256_and_si256(_mm256_srli_epi32(values, 8), byte), weight));
        green = _mm256_add_epi32(
            green,
            _mm256_mullo_epi32(_mm256_and_si256(_mm256_srli_epi32(values, 16), byte), weight));
        blue = _mm256_add_epi32(blue, _mm256_mullo_epi32(_mm256_srli_epi32(values, 24), weight));
      }
      store_block_avx2(red, green, blue, x, out, reversed_eights);
    }
    across<3>(in, out, blocks * 8, out_width_);
  }
#endif

  // Where output column x goes in a row: mirrored or not.
  [[nodiscard]] std::size_t column(std::size_t x) const noexcept {
    const std::size_t width = need_horizontal_ ? out_width_ : in_width_;
    return mirror_ ? width - 1 - x : x;
  }

  detail::resample_axis horizontal_;
  detail::resample_axis vertical_;
  std::size_t channels_ = 0;
  std::size_t in_width_ = 0;
  std::size_t out_height_ = 0;
  std::size_t out_width_ = 0;
  detail::resample_isa isa_ = detail::resample_isa::plain;
  bool mirror_ = false;
  bool need_horizontal_ = false;
  bool need_vertical_ = false;
  std::size_t first_row_ = 0;
  std::size_t end_row_ = 0;
  std::size_t row_bytes_ = 0;
  std::vector<std::uint8_t> kept_;    // the rows the vertical pass reads, resampled across
  std::vector<std::uint8_t> planes_;  // a row's channels apart (the AVX2 horizontal pass)
  std::size_t plane_stride_ = 0;
  std::vector<std::int32_t> sums_;
  std::vector<std::uint8_t> out_row_;
  std::vector<std::int32_t> pair_weights_;  // a row's vertical weights, as the AVX2 pass takes them
};

}  // namespace crema
