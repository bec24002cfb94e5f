#pragma once

#include <cstddef>
#include <cstdint>

/// @file
/// What a transform needs of an image, said before the image is decoded: a window of the full
/// image (from the header's size and the sample's own randomness) and the smallest size it may
/// be decoded at. A decoder decodes only that; the CPU and GPU decoders take the same plan, so a
/// sample's window does not depend on where it is decoded.

namespace crema {

/// @brief A rectangle of an image's pixels: rows [top, top + height), columns
/// [left, left + width).
struct pixel_window {
  std::size_t top = 0;
  std::size_t left = 0;
  std::size_t height = 0;
  std::size_t width = 0;

  friend constexpr bool operator==(const pixel_window&, const pixel_window&) noexcept = default;
};

/// @brief What a transform asks a decoder for.
struct decode_plan {
  /// The part of the full-resolution image the transform reads.
  pixel_window window;
  /// The window may be decoded smaller (JPEG's DCT scaling by 1/2, 1/4, 1/8) as long as it
  /// keeps at least this many rows and columns: the size the transform resizes it to. 0 decodes
  /// at full resolution.
  std::size_t min_height = 0;
  std::size_t min_width = 0;
};

/// @brief A decoded window as it reaches a transform: the rows of the region decoded (which
/// holds the plan's window, at 1/`scale` of its size), and where the plan's window lies in it.
struct decoded_window {
  std::size_t channels = 0;
  std::size_t height = 0;  ///< rows of the decoded region
  std::size_t width = 0;   ///< columns of the decoded region
  std::size_t scale = 1;   ///< 1, 2, 4 or 8: the region is the image shrunk by this much
  /// The plan's window in the region's pixels (fractional when scaled): what to resample.
  double box_top = 0;
  double box_left = 0;
  double box_height = 0;
  double box_width = 0;
};

/// @brief Some consecutive rows of a decoded window, while they are in the cache.
struct pixel_rows {
  const std::uint8_t* data = nullptr;  ///< the first row's first pixel (interleaved channels)
  std::size_t stride = 0;              ///< bytes from one row to the next
  std::size_t first = 0;               ///< the first row's number in the decoded region
  std::size_t count = 0;               ///< rows

  /// @return row `i` of the band (0 for the first)
  [[nodiscard]] const std::uint8_t* row(std::size_t i) const noexcept { return data + i * stride; }
};

/// @return the largest of 1, 2, 4, 8 that shrinks `size` pixels to no fewer than `least`
///         (libjpeg's scaled size is the size divided, rounded up)
[[nodiscard]] constexpr std::size_t shrink_factor(std::size_t size, std::size_t least) noexcept {
  std::size_t factor = 1;
  while (factor < 8 && least > 0 && (size + 2 * factor - 1) / (2 * factor) >= least) {
    factor *= 2;
  }
  return least == 0 ? 1 : factor;
}

/// @brief How much of the output's detail a window decoded smaller may give up.
enum class decode_detail {
  /// The window keeps at least the output's rows and columns: resampled down, as Pillow
  /// resamples (the default; within 1 of Pillow when decoded at full size).
  exact,
  /// The window may be decoded one scale smaller while that keeps at least 3/4 of the output's
  /// rows and columns, and is resampled up from there: a window 1.5 to 2 times the output is
  /// decoded at 1/2 rather than at full size, for less detail (docs/datasets.md states the
  /// difference from Pillow) and less decoding.
  reduced,
};

/// @return the factor (1, 2, 4 or 8) a JPEG decoder that scales the DCT decodes `plan`'s window
///         smaller by: the largest that keeps both of the plan's minimum sizes, or with
///         `decode_detail::reduced` 3/4 of them (rounded up)
[[nodiscard]] constexpr std::size_t shrink_factor(
    const decode_plan& plan, decode_detail detail = decode_detail::exact) noexcept {
  const auto least = [detail](std::size_t size) {
    return detail == decode_detail::reduced && size > 0 ? (3 * size + 3) / 4 : size;
  };
  const std::size_t across = shrink_factor(plan.window.width, least(plan.min_width));
  const std::size_t down = shrink_factor(plan.window.height, least(plan.min_height));
  return across < down ? across : down;
}

}  // namespace crema
