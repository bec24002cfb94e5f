#pragma once

#include <crema/io/image/decode_options.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

/// @file
/// torchvision's ColorJitter (brightness, contrast, saturation; no hue): the options, one
/// sample's draw, and the draw applied to an image of values in [0, 1]. Component `crema::image`.

namespace crema {

/// @brief torchvision's ColorJitter less hue: brightness, contrast and saturation factors, each
/// drawn uniformly from [max(0, 1 - x), 1 + x] (x = 0 leaves that property alone), applied in a
/// random order to the resampled image as values in [0, 1], before it is normalised.
struct color_jitter {
  float brightness = 0;
  float contrast = 0;
  float saturation = 0;

  /// @return whether any property is jittered (none: nothing is drawn, nothing computed)
  [[nodiscard]] constexpr bool enabled() const noexcept {
    return brightness > 0 || contrast > 0 || saturation > 0;
  }
};

/// @brief One sample's jitter: the factors drawn and the order they are applied in.
struct color_jitter_draw {
  enum class property : std::uint8_t { brightness, contrast, saturation };
  std::array<property, 3> order = {property::brightness, property::contrast, property::saturation};
  float brightness = 1;
  float contrast = 1;
  float saturation = 1;
};

/// @brief Draws a sample's jitter from `rng`: the order (a random permutation, as torchvision's
/// `randperm`), then the factors of brightness, contrast and saturation, each only where it is
/// jittered.
[[nodiscard]] inline color_jitter_draw draw_color_jitter(const color_jitter& jitter,
                                                         sample_rng& rng) {
  color_jitter_draw draw;
  for (std::size_t i = draw.order.size() - 1; i > 0; --i) {
    std::swap(draw.order[i], draw.order[rng.below(i + 1)]);
  }
  const auto factor = [&rng](float spread) {
    const double low = std::max(0.0, 1.0 - static_cast<double>(spread));
    return static_cast<float>(rng.uniform(low, 1.0 + static_cast<double>(spread)));
  };
  if (jitter.brightness > 0) draw.brightness = factor(jitter.brightness);
  if (jitter.contrast > 0) draw.contrast = factor(jitter.contrast);
  if (jitter.saturation > 0) draw.saturation = factor(jitter.saturation);
  return draw;
}

/// @brief Applies a drawn jitter to an image of values in [0, 1], channel-first (`channels` x
/// `pixels`), in place, with torchvision's formulas: brightness scales the values; contrast
/// blends them with the mean of the image's gray; saturation blends each pixel with its gray;
/// each result is clamped to [0, 1]. Gray is ITU-R 601-2 luma (0.2989 R + 0.587 G + 0.114 B;
/// channel 0 is blue where `order` is BGR); one channel is its own gray, and its saturation
/// stays as it is.
inline void apply_color_jitter(const color_jitter_draw& draw, std::span<float> values,
                               std::size_t channels, channel_order order) noexcept {
  const std::size_t pixels = channels == 0 ? 0 : values.size() / channels;
  const bool bgr = order == channel_order::bgr;
  const float red_weight = 0.2989F;
  const float blue_weight = 0.114F;
  const auto gray = [&](std::size_t i) {
    if (channels == 1) return values[i];
    const float red = values[(bgr ? 2 : 0) * pixels + i];
    const float blue = values[(bgr ? 0 : 2) * pixels + i];
    return red_weight * red + 0.587F * values[pixels + i] + blue_weight * blue;
  };
  const auto blend = [](float value, float with, float factor) {
    return std::clamp(factor * value + (1.0F - factor) * with, 0.0F, 1.0F);
  };
  for (const color_jitter_draw::property property : draw.order) {
    switch (property) {
      case color_jitter_draw::property::brightness:
        if (draw.brightness == 1) break;
        for (float& value : values) value = std::clamp(value * draw.brightness, 0.0F, 1.0F);
        break;
      case color_jitter_draw::property::contrast: {
        if (draw.contrast == 1) break;
        double sum = 0;
        for (std::size_t i = 0; i < pixels; ++i) sum += gray(i);
        const auto mean =
            static_cast<float>(sum / static_cast<double>(std::max<std::size_t>(pixels, 1)));
        for (float& value : values) value = blend(value, mean, draw.contrast);
        break;
      }
      case color_jitter_draw::property::saturation:
        if (draw.saturation == 1 || channels == 1) break;
        for (std::size_t i = 0; i < pixels; ++i) {
          const float luma = gray(i);
          for (std::size_t c = 0; c < channels; ++c) {
            float& value = values[c * pixels + i];
            value = blend(value, luma, draw.saturation);
          }
        }
        break;
    }
  }
}

}  // namespace crema
