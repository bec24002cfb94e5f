#pragma once

#include <crema/io/decode_plan.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <cstddef>

/// @file
/// A sample's geometry, as torchvision's transforms choose it: RandomResizedCrop's window and
/// Resize + CenterCrop, and the box of the image an output is resampled from. Component
/// `crema::image`.

namespace crema {

/// @brief torchvision's RandomResizedCrop: a window of random area and aspect ratio (ten tries,
/// then the centre), resized to `height` x `width`.
struct random_resized_crop {
  std::size_t height = 224;
  std::size_t width = 224;
  double scale_low = 0.08;        ///< the window's share of the image's area, at least
  double scale_high = 1.0;        ///< and at most
  double ratio_low = 3.0 / 4.0;   ///< the window's width / height, at least (drawn log-uniform)
  double ratio_high = 4.0 / 3.0;  ///< and at most
};

/// @brief torchvision's Resize(resize) then CenterCrop(crop): the short side resized to
/// `resize` (the long side in proportion, rounded down), then the centre `crop_height` x
/// `crop_width`. Only the part of the image the crop's pixels are made from is decoded.
struct resize_center_crop {
  std::size_t resize = 256;
  std::size_t crop_height = 224;
  std::size_t crop_width = 224;
};

/// @brief A region of an image to resample, in its pixels (fractional; Pillow's `box`).
struct resample_box {
  double top = 0;
  double left = 0;
  double height = 0;
  double width = 0;
};

/// @brief One sample's geometry, drawn before decoding: the window to decode, the box of the
/// full image the output is resampled from (inside the window), and the output size.
struct image_geometry {
  pixel_window window;
  resample_box box;
  std::size_t out_height = 0;
  std::size_t out_width = 0;
};

/// @brief The window torchvision's RandomResizedCrop.get_params picks, drawing from `rng`
/// instead of torch's generator: ten tries of an area in [scale_low, scale_high] of the image's
/// and a log-uniform ratio, kept when it fits; else the centre at the nearest allowed ratio.
[[nodiscard]] pixel_window random_resized_crop_window(std::size_t height, std::size_t width,
                                                      const random_resized_crop& crop,
                                                      sample_rng& rng);

}  // namespace crema

#if defined(CREMA_HEADER_ONLY)
#include <crema/io/image/detail/image_geometry_impl.hpp>
#endif
