#pragma once

#include <crema/core/error.hpp>
#include <crema/io/image/decode_plan.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

/// @file
/// Bilinear resampling of 8-bit images with antialiasing when shrinking: Pillow's algorithm (the
/// triangle filter widened by the shrink factor, weights normalised and held in 22-bit fixed
/// point, a horizontal pass to 8-bit rows, then a vertical pass), so that the same pixels and
/// box give Pillow's values. Fed by bands of rows as a decoder hands them over: each band is
/// resampled across while it is in the cache, and only the rows the vertical pass needs are
/// kept, at the output's width. Component `crema::image` (no dependency of its own).

namespace crema {

/// @brief A region of an image to resample, in its pixels (fractional; Pillow's `box`).
struct resample_box {
  double top = 0;
  double left = 0;
  double height = 0;
  double width = 0;
};

namespace detail {

// One axis's weights: for each output index, the first input index and the weights from there.
struct resample_axis {
  static constexpr int precision_bits = 32 - 8 - 2;  // Pillow's

  std::vector<std::size_t> first;   // per output index
  std::vector<std::size_t> count;   // taps per output index
  std::vector<std::int32_t> weights;  // taps_per_output per output index, fixed point
  std::vector<double> scratch;
  std::size_t taps_per_output = 0;

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

[[nodiscard]] inline std::uint8_t clip8(std::int32_t value) noexcept {
  constexpr int bits = resample_axis::precision_bits;
  if (value >= (std::int32_t{1} << bits << 8)) return 255;
  if (value <= 0) return 0;
  return static_cast<std::uint8_t>(value >> bits);
}

}  // namespace detail

/// @brief Resamples a box of a decoded region to an output size, from bands of rows.
///
/// `start` once per image, `rows` for each band as it comes (top to bottom), then `finish`,
/// which hands each output row (interleaved 8-bit) to a writer. Its buffers grow to the largest
/// image and are then reused: nothing is allocated per image in the steady state. One per
/// thread; not thread-safe.
class band_resampler {
 public:
  /// @brief Prepares for one image.
  /// @param channels, height, width the decoded region's
  /// @param box the part of the region to resample (inside it)
  /// @param out_height, out_width the output size (at least 1 each)
  void start(std::size_t channels, std::size_t height, std::size_t width, resample_box box,
             std::size_t out_height, std::size_t out_width) {
    channels_ = channels;
    in_width_ = width;
    out_height_ = out_height;
    out_width_ = out_width;
    // As Pillow: a pass is skipped where it would leave the values as they are.
    need_horizontal_ = out_width != width || box.left != 0 || box.width != static_cast<double>(width);
    need_vertical_ =
        out_height != height || box.top != 0 || box.height != static_cast<double>(height);
    vertical_.compute(height, box.top, box.top + box.height, out_height);
    if (need_horizontal_) horizontal_.compute(width, box.left, box.left + box.width, out_width);
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
        std::copy(in, in + row_bytes_, out);
      } else if (channels_ == 3) {
        across<3>(in, out);
      } else {
        across<1>(in, out);
      }
    }
  }

  /// @brief Makes the output, row by row: `write(row, values)` gets each output row's
  /// `out_width * channels` interleaved values, top to bottom.
  template <class Write>
  void finish(Write&& write) {
    if (!need_vertical_) {
      for (std::size_t row = 0; row < out_height_; ++row) write(row, kept_.data() + row * row_bytes_);
      return;
    }
    const std::size_t values = out_width_ * channels_;
    sums_.resize(values);
    out_row_.resize(values);
    for (std::size_t row = 0; row < out_height_; ++row) {
      std::fill(sums_.begin(), sums_.end(), std::int32_t{1} << (detail::resample_axis::precision_bits - 1));
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
  template <std::size_t Channels>
  void across(const std::uint8_t* in, std::uint8_t* out) const noexcept {
    const std::size_t taps_per_output = horizontal_.taps_per_output;
    for (std::size_t x = 0; x < out_width_; ++x) {
      const std::uint8_t* source = in + horizontal_.first[x] * Channels;
      const std::int32_t* weights = horizontal_.weights.data() + x * taps_per_output;
      std::int32_t sums[Channels];
      for (std::size_t c = 0; c < Channels; ++c) {
        sums[c] = std::int32_t{1} << (detail::resample_axis::precision_bits - 1);
      }
      const std::size_t taps = horizontal_.count[x];
      for (std::size_t tap = 0; tap < taps; ++tap) {
        for (std::size_t c = 0; c < Channels; ++c) sums[c] += source[tap * Channels + c] * weights[tap];
      }
      for (std::size_t c = 0; c < Channels; ++c) out[x * Channels + c] = detail::clip8(sums[c]);
    }
  }

  detail::resample_axis horizontal_;
  detail::resample_axis vertical_;
  std::size_t channels_ = 0;
  std::size_t in_width_ = 0;
  std::size_t out_height_ = 0;
  std::size_t out_width_ = 0;
  bool need_horizontal_ = false;
  bool need_vertical_ = false;
  std::size_t first_row_ = 0;
  std::size_t end_row_ = 0;
  std::size_t row_bytes_ = 0;
  std::vector<std::uint8_t> kept_;  // the rows the vertical pass reads, resampled across
  std::vector<std::int32_t> sums_;
  std::vector<std::uint8_t> out_row_;
};

}  // namespace crema
