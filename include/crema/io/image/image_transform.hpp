#pragma once

#include <crema/core/record_shape.hpp>
#include <crema/io/image/color_jitter.hpp>
#include <crema/io/image/decode_options.hpp>
#include <crema/io/image/image_geometry.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

/// @file
/// ImageNet-style input: torchvision's RandomResizedCrop (training) and Resize + CenterCrop
/// (evaluation), a random horizontal flip, colour jitter, and ToTensor + Normalize (or 8-bit values
/// for engines that normalise on the GPU), planned before decoding so that only the window is
/// decoded, and resampled from the decoder's row bands while they are in the cache. Component
/// `crema::image`.

namespace crema {

/// @brief Where the values of one channel go: channel-first (C x H x W, what PyTorch takes) or
/// interleaved (H x W x C).
enum class pixel_layout { chw, hwc };

/// @brief What an `image_transform` does.
struct image_transform_options {
  std::variant<random_resized_crop, resize_center_crop> geometry = random_resized_crop{};
  /// Flip horizontally with probability 1/2.
  bool mirror = false;
  /// Brightness, contrast and saturation jitter (none by default), after the resize and flip.
  color_jitter jitter = {};
  pixel_layout layout = pixel_layout::chw;
  /// Float outputs are ((value / 255) - mean) / std per channel, computed in float as
  /// torchvision's ToTensor and Normalize compute them; 8-bit outputs are the values.
  std::array<float, 3> mean = {0.0F, 0.0F, 0.0F};
  std::array<float, 3> std = {1.0F, 1.0F, 1.0F};
  /// Channels (3, RGB, by default), DCT scaling, warnings, size limits.
  window_decode_options decode = {};
};

/// @brief Plans, then resamples and writes one image after another (one per producer: it holds
/// its own decoder, reader and buffers, which grow to the largest image and are then reused).
///
/// Every random choice (the window, the flip) is drawn from the sample's own generator in a
/// fixed order, before decoding, so the same seed gives the same samples whatever the producer,
/// thread and consumer counts, and whichever decoder decodes the window.
///
/// Its work is compiled once, in the `crema::image` library (or inline, with
/// `CREMA_HEADER_ONLY`): this header needs neither the codecs' nor the kernels' headers.
class image_transform {
 public:
  /// @throws crema::config_error for an empty output, a scale or ratio range that is empty or
  ///         not positive, a centre crop larger than the resized image, a zero std, or channels
  ///         other than 1 or 3
  explicit image_transform(image_transform_options options = {});
  image_transform(const image_transform& other);
  image_transform& operator=(const image_transform& other);
  image_transform(image_transform&& other) noexcept;
  image_transform& operator=(image_transform&& other) noexcept;
  ~image_transform();

  /// @return one output's shape (channels, height, width; for `hwc` the same values, laid out
  ///         interleaved)
  [[nodiscard]] record_shape shape() const noexcept {
    if (const auto* crop = std::get_if<random_resized_crop>(&options_.geometry)) {
      return {options_.decode.channels, crop->height, crop->width};
    }
    const auto& eval = std::get<resize_center_crop>(options_.geometry);
    return {options_.decode.channels, eval.crop_height, eval.crop_width};
  }

  /// @brief The sample's geometry for an image of `height` x `width`, drawing from `rng`.
  [[nodiscard]] image_geometry geometry(std::size_t height, std::size_t width,
                                        sample_rng& rng) const;

  /// @brief Decodes `bytes` (JPEG or PNG) and writes the transformed sample into `out`
  /// (`shape().elements()` values: float, normalised; or std::uint8_t).
  /// @throws crema::format_error naming `key` for an image that does not decode;
  ///         crema::length_error if `out` does not hold one sample
  void operator()(std::span<const std::byte> bytes, std::span<float> out, sample_rng rng,
                  std::string_view key);
  void operator()(std::span<const std::byte> bytes, std::span<std::uint8_t> out, sample_rng rng,
                  std::string_view key);

  /// @brief As above, with the geometry, the flip and the jitter given instead of drawn (the
  /// window must lie inside the image): for checking against other libraries, and for decoders
  /// elsewhere that must give a sample what it would get here. The jitter is applied only where
  /// the options ask for it.
  void apply(std::span<const std::byte> bytes, const image_geometry& geometry, bool flip,
             std::span<float> out, std::string_view key, const color_jitter_draw& jitter = {});
  void apply(std::span<const std::byte> bytes, const image_geometry& geometry, bool flip,
             std::span<std::uint8_t> out, std::string_view key,
             const color_jitter_draw& jitter = {});

  [[nodiscard]] const image_transform_options& options() const noexcept { return options_; }

 private:
  struct workspace;  // the decoder, the resampler and their buffers
  workspace& work();

  image_transform_options options_;
  std::unique_ptr<workspace> work_;
};

}  // namespace crema

#if defined(CREMA_HEADER_ONLY)
#include <crema/io/image/detail/image_transform_impl.hpp>
#endif

// `image_batcher` moved to <crema/io/image/image_batcher.hpp>. It is included here for one
// release, for code that found it here, and then goes.
#include <crema/io/image/image_batcher.hpp>
