#pragma once

#include <crema/core/detail/library_inline.hpp>
#include <crema/io/image/detail/round_half_even.hpp>
#include <crema/io/image/image_geometry.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>

// The geometry's arithmetic: compiled once in the crema::image library (src/image/), or included
// by image_geometry.hpp, inline, with CREMA_HEADER_ONLY.

namespace crema {

CREMA_LIBRARY_INLINE pixel_window random_resized_crop_window(std::size_t height, std::size_t width,
                                                            const random_resized_crop& crop,
                                                            sample_rng& rng) {
  const double area = static_cast<double>(height) * static_cast<double>(width);
  const double log_low = std::log(crop.ratio_low);
  const double log_high = std::log(crop.ratio_high);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target = area * rng.uniform(crop.scale_low, crop.scale_high);
    const double ratio = std::exp(rng.uniform(log_low, log_high));
    const long w = detail::round_half_even(std::sqrt(target * ratio));
    const long h = detail::round_half_even(std::sqrt(target / ratio));
    if (w > 0 && h > 0 && static_cast<std::size_t>(w) <= width &&
        static_cast<std::size_t>(h) <= height) {
      const auto rows = static_cast<std::size_t>(h);
      const auto columns = static_cast<std::size_t>(w);
      const std::size_t top = rng.below(height - rows + 1);
      const std::size_t left = rng.below(width - columns + 1);
      return {top, left, rows, columns};
    }
  }
  const double in_ratio = static_cast<double>(width) / static_cast<double>(height);
  std::size_t rows = height;
  std::size_t columns = width;
  if (in_ratio < crop.ratio_low) {
    rows = static_cast<std::size_t>(
        std::max(1L, detail::round_half_even(static_cast<double>(width) / crop.ratio_low)));
  } else if (in_ratio > crop.ratio_high) {
    columns = static_cast<std::size_t>(
        std::max(1L, detail::round_half_even(static_cast<double>(height) * crop.ratio_high)));
  }
  rows = std::min(rows, height);
  columns = std::min(columns, width);
  return {(height - rows) / 2, (width - columns) / 2, rows, columns};
}

}  // namespace crema
