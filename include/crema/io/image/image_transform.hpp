#pragma once

#include <crema/core/error.hpp>
#include <crema/io/decode_plan.hpp>
#include <crema/io/image/encoded_sample_reader.hpp>
#include <crema/io/image/image_window_decoder.hpp>
#include <crema/io/image/resample.hpp>
#include <crema/pipeline/batch_label.hpp>
#include <crema/pipeline/record_shape.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

/// @file
/// ImageNet-style input: torchvision's RandomResizedCrop (training) and Resize + CenterCrop
/// (evaluation), a random horizontal flip, colour jitter, and ToTensor + Normalize (or 8-bit values
/// for engines that normalise on the GPU), planned before decoding so that only the window is
/// decoded, and resampled from the decoder's row bands while they are in the cache. Component
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

/// @brief One sample's geometry, drawn before decoding: the window to decode, the box of the
/// full image the output is resampled from (inside the window), and the output size.
struct image_geometry {
  pixel_window window;
  resample_box box;
  std::size_t out_height = 0;
  std::size_t out_width = 0;
};

namespace detail {

// Python's round(): to the nearest, ties to even (the rounding mode's default).
[[nodiscard]] inline long round_half_even(double value) noexcept {
  return static_cast<long>(std::nearbyint(value));
}

}  // namespace detail

/// @brief The window torchvision's RandomResizedCrop.get_params picks, drawing from `rng`
/// instead of torch's generator: ten tries of an area in [scale_low, scale_high] of the image's
/// and a log-uniform ratio, kept when it fits; else the centre at the nearest allowed ratio.
[[nodiscard]] inline pixel_window random_resized_crop_window(std::size_t height, std::size_t width,
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

/// @brief Plans, then resamples and writes one image after another (one per producer: it holds
/// its own decoder, reader and buffers, which grow to the largest image and are then reused).
///
/// Every random choice (the window, the flip) is drawn from the sample's own generator in a
/// fixed order, before decoding, so the same seed gives the same samples whatever the producer,
/// thread and consumer counts, and whichever decoder decodes the window.
class image_transform {
 public:
  /// @throws crema::config_error for an empty output, a scale or ratio range that is empty or
  ///         not positive, a centre crop larger than the resized image, a zero std, or channels
  ///         other than 1 or 3
  explicit image_transform(image_transform_options options = {})
      : options_(std::move(options)), decoder_(options_.decode) {
    const std::size_t channels = options_.decode.channels;
    if (channels != 1 && channels != 3) {
      detail::fail<config_error>("image_transform: channels must be 1 or 3, not {}", channels);
    }
    if (const auto* crop = std::get_if<random_resized_crop>(&options_.geometry)) {
      if (crop->height == 0 || crop->width == 0) {
        detail::fail<config_error>("image_transform: random_resized_crop of {} x {} is empty",
                                   crop->height, crop->width);
      }
      if (!(crop->scale_low > 0 && crop->scale_low <= crop->scale_high) ||
          !(crop->ratio_low > 0 && crop->ratio_low <= crop->ratio_high)) {
        detail::fail<config_error>(
            "image_transform: random_resized_crop's scale [{}, {}] and ratio [{}, {}] must be "
            "positive ranges",
            crop->scale_low, crop->scale_high, crop->ratio_low, crop->ratio_high);
      }
    } else {
      const auto& eval = std::get<resize_center_crop>(options_.geometry);
      if (eval.crop_height == 0 || eval.crop_width == 0 || eval.resize == 0) {
        detail::fail<config_error>(
            "image_transform: resize {} and centre crop {} x {} must not "
            "be 0",
            eval.resize, eval.crop_height, eval.crop_width);
      }
      if (eval.crop_height > eval.resize || eval.crop_width > eval.resize) {
        detail::fail<config_error>(
            "image_transform: a centre crop of {} x {} is larger than the short side {} it is "
            "cut from",
            eval.crop_height, eval.crop_width, eval.resize);
      }
    }
    const color_jitter& jitter = options_.jitter;
    for (const float spread : {jitter.brightness, jitter.contrast, jitter.saturation}) {
      if (!(spread >= 0.0F && spread <= 1e6F)) {
        detail::fail<config_error>(
            "image_transform: colour jitter of brightness {}, contrast {}, saturation {}: each "
            "must be 0 or more",
            jitter.brightness, jitter.contrast, jitter.saturation);
      }
    }
    for (std::size_t c = 0; c < 3; ++c) {
      if (!(options_.std[c] != 0.0F)) {
        detail::fail<config_error>("image_transform: std of channel {} is {}", c, options_.std[c]);
      }
      normalizers_[c] = value_normalizer(options_.mean[c], options_.std[c]);
    }
  }
  image_transform(const image_transform& other) : image_transform(other.options_) {}
  image_transform& operator=(const image_transform& other) {
    if (this != &other) *this = image_transform(other.options_);
    return *this;
  }
  image_transform(image_transform&&) noexcept = default;
  image_transform& operator=(image_transform&&) noexcept = default;
  ~image_transform() = default;

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
                                        sample_rng& rng) const {
    if (const auto* crop = std::get_if<random_resized_crop>(&options_.geometry)) {
      const pixel_window window = random_resized_crop_window(height, width, *crop, rng);
      // torchvision crops, then resizes: the filter's taps stay inside the window.
      return {window,
              {static_cast<double>(window.top), static_cast<double>(window.left),
               static_cast<double>(window.height), static_cast<double>(window.width)},
              crop->height,
              crop->width};
    }
    return center_geometry(height, width, std::get<resize_center_crop>(options_.geometry));
  }

  /// @brief Decodes `bytes` (JPEG or PNG) and writes the transformed sample into `out`
  /// (`shape().elements()` values of T: float, normalised; or std::uint8_t).
  /// @throws crema::format_error naming `key` for an image that does not decode;
  /// crema::length_error
  ///         if `out` does not hold one sample
  template <class T>
  void operator()(std::span<const std::byte> bytes, std::span<T> out, sample_rng rng,
                  std::string_view key) {
    run(bytes, out, key,
        [&](const image_info& info, image_geometry& chosen, bool& flip, color_jitter_draw& jitter) {
          chosen = geometry(info.height, info.width, rng);
          flip = options_.mirror && rng.bernoulli(0.5);
          if (options_.jitter.enabled()) jitter = draw_color_jitter(options_.jitter, rng);
        });
  }

  /// @brief As above, with the geometry, the flip and the jitter given instead of drawn (the
  /// window must lie inside the image): for checking against other libraries, and for decoders
  /// elsewhere that must give a sample what it would get here. The jitter is applied only where
  /// the options ask for it.
  template <class T>
  void apply(std::span<const std::byte> bytes, const image_geometry& geometry, bool flip,
             std::span<T> out, std::string_view key, const color_jitter_draw& jitter = {}) {
    run(bytes, out, key,
        [&](const image_info&, image_geometry& chosen, bool& flipped, color_jitter_draw& drawn) {
          chosen = geometry;
          flipped = flip;
          drawn = jitter;
        });
  }

  [[nodiscard]] const image_transform_options& options() const noexcept { return options_; }

 private:
  // The decoder's bands go straight into the resampler.
  struct resampling_sink {
    band_resampler& resampler;
    const image_geometry& geometry;
    const bool& flip;
    void start(const decoded_window& decoded) {
      const double scale = static_cast<double>(decoded.scale);
      const resample_box box{
          decoded.box_top + (geometry.box.top - static_cast<double>(geometry.window.top)) / scale,
          decoded.box_left +
              (geometry.box.left - static_cast<double>(geometry.window.left)) / scale,
          geometry.box.height / scale, geometry.box.width / scale};
      resampler.start(decoded.channels, decoded.height, decoded.width, box, geometry.out_height,
                      geometry.out_width, flip);
    }
    void rows(const pixel_rows& band) { resampler.rows(band); }
  };

  template <class T, class Choose>
  void run(std::span<const std::byte> bytes, std::span<T> out, std::string_view key,
           Choose&& choose) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, std::uint8_t>,
                  "crema: an image_transform writes float or std::uint8_t samples");
    const record_shape shape = this->shape();
    if (out.size() != shape.elements()) {
      detail::fail<length_error>("image {}: a sample of {} values does not fit {} values", key,
                                 shape.elements(), out.size());
    }
    image_geometry chosen;
    bool flip = false;
    color_jitter_draw jitter;
    const auto plan_for = [&](const image_info& info) {
      choose(info, chosen, flip, jitter);
      return plan_of(chosen);
    };
    resampling_sink sink{resampler_, chosen, flip};
    decoder_.decode(bytes, key, plan_for, sink);
    if (options_.jitter.enabled()) {
      write_jittered(out, chosen, jitter);
    } else {
      write(out, chosen);
    }
  }

  [[nodiscard]] static decode_plan plan_of(const image_geometry& chosen) noexcept {
    // Decoded smaller only while the box keeps at least the output's size.
    const auto least = [](std::size_t out, std::size_t window, double box) {
      return static_cast<std::size_t>(
          std::ceil(static_cast<double>(out) * static_cast<double>(window) / box));
    };
    return {chosen.window, least(chosen.out_height, chosen.window.height, chosen.box.height),
            least(chosen.out_width, chosen.window.width, chosen.box.width)};
  }

  // Resize(resize) + CenterCrop as a box of the original image: the pixels of the centre crop
  // of the resized image are made from that box, by the same weights. Pillow's taps reach into
  // the image beyond the box, so the window holds the box and their reach, where the image has
  // pixels: an outer output's centre lies half a step inside the box and its taps reach one step
  // (the filter's support) from there, so half a step past the box, and half a decoded pixel
  // more when the window is decoded at 1/s. The margin is 0.5 step + 1.5 s + 1 pixels on each
  // side: that, a decoded pixel and one more to spare for the box's rounding. The factor s is
  // the one the decoder will pick for the window, which grows with the margin: the smallest
  // margin whose window it decodes at s or finer.
  [[nodiscard]] image_geometry center_geometry(std::size_t height, std::size_t width,
                                               const resize_center_crop& eval) const {
    std::size_t new_height = 0;
    std::size_t new_width = 0;
    if (width <= height) {
      new_width = eval.resize;
      new_height =
          static_cast<std::size_t>(static_cast<double>(eval.resize) * static_cast<double>(height) /
                                   static_cast<double>(width));
    } else {
      new_height = eval.resize;
      new_width =
          static_cast<std::size_t>(static_cast<double>(eval.resize) * static_cast<double>(width) /
                                   static_cast<double>(height));
    }
    const auto crop_start = [](std::size_t size, std::size_t crop) {
      return static_cast<double>(
          detail::round_half_even((static_cast<double>(size) - static_cast<double>(crop)) / 2.0));
    };
    const double scale_y = static_cast<double>(height) / static_cast<double>(new_height);
    const double scale_x = static_cast<double>(width) / static_cast<double>(new_width);
    const resample_box box{crop_start(new_height, eval.crop_height) * scale_y,
                           crop_start(new_width, eval.crop_width) * scale_x,
                           static_cast<double>(eval.crop_height) * scale_y,
                           static_cast<double>(eval.crop_width) * scale_x};
    const auto reach = [](double box_start, double box_size, double step, double factor,
                          std::size_t size) {
      const double margin = std::ceil(0.5 * step + 1.5 * factor) + 1.0;
      const double low = std::max(0.0, std::floor(box_start - margin));
      const double high =
          std::min(static_cast<double>(size), std::ceil(box_start + box_size + margin));
      return std::pair{static_cast<std::size_t>(low), static_cast<std::size_t>(high - low)};
    };
    image_geometry chosen;
    for (std::size_t factor = 1;; factor *= 2) {
      const double f = static_cast<double>(factor);
      const auto [top, rows] = reach(box.top, box.height, scale_y, f, height);
      const auto [left, columns] = reach(box.left, box.width, scale_x, f, width);
      chosen = {{top, left, rows, columns}, box, eval.crop_height, eval.crop_width};
      if (factor == 8 || !options_.decode.dct_scaling ||
          shrink_factor(plan_of(chosen), options_.decode.detail) <= factor) {
        return chosen;
      }
    }
  }

  // The resampler's rows come channel by channel, already mirrored.
  template <class T>
  void write(std::span<T> out, const image_geometry& chosen) {
    const std::size_t channels = options_.decode.channels;
    const std::size_t height = chosen.out_height;
    const std::size_t width = chosen.out_width;
    const bool chw = options_.layout == pixel_layout::chw;
    resampler_.finish([&](std::size_t row, const std::uint8_t* values) {
      for (std::size_t c = 0; c < channels; ++c) {
        const std::uint8_t* plane = values + c * width;
        if (chw) {
          T* to = out.data() + (c * height + row) * width;
          if constexpr (std::is_same_v<T, float>) {
            normalizers_[c](plane, width, to);
          } else {
            std::copy(plane, plane + width, to);
          }
        } else {
          T* to = out.data() + row * width * channels + c;
          for (std::size_t x = 0; x < width; ++x) {
            if constexpr (std::is_same_v<T, float>) {
              to[x * channels] = normalizers_[c](plane[x]);
            } else {
              to[x * channels] = plane[x];
            }
          }
        }
      }
    });
  }

  // With jitter the whole image is needed first (contrast takes its mean): the rows are
  // gathered as values in [0, 1], jittered, then written; 8-bit outputs are rounded back.
  template <class T>
  void write_jittered(std::span<T> out, const image_geometry& chosen,
                      const color_jitter_draw& jitter) {
    const std::size_t channels = options_.decode.channels;
    const std::size_t height = chosen.out_height;
    const std::size_t width = chosen.out_width;
    const std::size_t pixels = height * width;
    jittered_.resize(channels * pixels);
    resampler_.finish([&](std::size_t row, const std::uint8_t* values) {
      for (std::size_t c = 0; c < channels; ++c) {
        float* to = jittered_.data() + c * pixels + row * width;
        for (std::size_t x = 0; x < width; ++x) {
          to[x] = static_cast<float>(values[c * width + x]) / 255.0F;
        }
      }
    });
    apply_color_jitter(jitter, jittered_, channels, options_.decode.order);
    const bool chw = options_.layout == pixel_layout::chw;
    for (std::size_t c = 0; c < channels; ++c) {
      for (std::size_t i = 0; i < pixels; ++i) {
        const float x = jittered_[c * pixels + i];
        T& to = chw ? out[c * pixels + i] : out[i * channels + c];
        if constexpr (std::is_same_v<T, float>) {
          to = (x - options_.mean[c]) / options_.std[c];
        } else {
          to = static_cast<std::uint8_t>(std::lround(x * 255.0F));
        }
      }
    }
  }

  image_transform_options options_;
  image_window_decoder decoder_;
  band_resampler resampler_;
  std::array<value_normalizer, 3> normalizers_;
  std::vector<float> jittered_;  // the jittered image, reused
};

/// @brief A batch transform for the pipeline over image files (`image_folder_source`,
/// `image_list_source`) or encoded Datums (an LMDB of JPEGs): record `i` of a batch gets the
/// `image_transform` of its image, and its label. Copied once per producer; each copy reads files
/// into its own buffer (in parallel with the other producers) and decodes with its own decoder.
/// @tparam MakeBatch `Batch(const batch_context&, record_shape)`: makes one batch per slot, with
///         `record(i)` (a span of float or std::uint8_t) and `set_label(i, label)`
template <class MakeBatch>
class image_batcher {
 public:
  using batch_type = std::invoke_result_t<const MakeBatch&, const batch_context&, record_shape>;
  /// What `set_label` takes: the batch's `label_type` (float for `host_batch` and `device_batch`
  /// of 8-bit samples), or its element type. An image whose label it cannot hold exactly (a
  /// class past 255 in 8-bit labels) is a `format_error` naming its path or key.
  using label_type = typename detail::batch_label_of<batch_type>::type;

  image_batcher(image_transform transform, MakeBatch make, image_file_reader_options reading = {})
      : transform_(std::move(transform)), make_(std::move(make)), reader_(reading) {}

  /// @return one sample's shape in a batch
  [[nodiscard]] record_shape shape() const noexcept { return transform_.shape(); }

  [[nodiscard]] batch_type make_batch(const batch_context& where) const {
    return make_(where, transform_.shape());
  }

  /// @brief A record's encoded image (an image file, read on this producer's thread, or an
  /// encoded Datum): decoded, transformed, written with its label.
  template <encoded_sample_record Record>
  void operator()(const Record& record, batch_type& batch, const sample_context& context) {
    const encoded_sample image = reader_(record);
    transform_(image.bytes, batch.record(context.index), context.rng(), image.key);
    batch.set_label(context.index, detail::exact_label<label_type>(image.label, image.key));
  }

  [[nodiscard]] const image_transform& transform() const noexcept { return transform_; }

 private:
  image_transform transform_;
  MakeBatch make_;
  encoded_sample_reader reader_;
};

}  // namespace crema
