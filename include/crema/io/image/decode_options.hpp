#pragma once

#include <crema/io/decode_plan.hpp>

#include <cstddef>

/// @file
/// How images are decoded: the channel order, and the options of the whole-image decoder
/// (`image_decoder`, Caffe's way) and of the window decoder (`image_window_decoder`, the image
/// transforms' way). Light, so that a transform's options need no codec's headers. Component
/// `crema::image`.

namespace crema {

/// @brief The order of a colour image's three channels.
enum class channel_order {
  bgr,  ///< OpenCV's and so Caffe's (raw records made by convert_imageset are BGR too)
  rgb,  ///< what torchvision and most other tools give
};

/// @brief How an `image_decoder` decodes.
struct image_decode_options {
  /// 0: as stored (1 for grayscale, 3 for colour; alpha is dropped); 1: gray (colour converted
  /// with OpenCV's BT.601 weights); 3: colour (gray repeated).
  std::size_t channels = 0;
  channel_order order = channel_order::bgr;
  /// Images with more pixels are refused before anything is allocated for them (a corrupt or
  /// hostile header can claim 2^32 x 2^32).
  std::size_t max_pixels = std::size_t{1} << 28;
};

/// @brief How an `image_window_decoder` decodes.
struct window_decode_options {
  /// 3: colour (gray repeated); 1: gray (for JPEG, the luma libjpeg decodes); 0: as stored.
  std::size_t channels = 3;
  /// RGB by default, as torchvision and most models trained today expect.
  channel_order order = channel_order::rgb;
  /// Images with more pixels are refused before anything is allocated for them.
  std::size_t max_pixels = std::size_t{1} << 28;
  /// libjpeg's warnings (corrupt data it could decode past, such as "premature end of data
  /// segment" for a file cut short) are errors unless this is set.
  bool accept_warnings = false;
  /// Decode JPEG windows smaller (1/2, 1/4, 1/8) where the plan's minimum size allows.
  bool dct_scaling = true;
  /// With `dct_scaling`: whether a window keeps the plan's minimum size (`exact`), or 3/4 of it
  /// (`reduced`: faster, less detail; see `decode_detail`).
  decode_detail detail = decode_detail::exact;
  /// Rows handed over at a time (at least libjpeg's own minimum).
  std::size_t band_rows = 16;
};

}  // namespace crema
