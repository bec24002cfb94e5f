#pragma once

#include <crema/core/detail/library_inline.hpp>
#include <crema/core/error.hpp>
#include <crema/io/decode_plan.hpp>
#include <crema/io/image/detail/round_half_even.hpp>
#include <crema/io/image/image_transform.hpp>
#include <crema/io/image/image_window_decoder.hpp>
#include <crema/io/image/resample.hpp>
#include <crema/io/image/value_normalizer.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

// image_transform's work: compiled once in the crema::image library (src/image/), or included by
// image_transform.hpp, inline, with CREMA_HEADER_ONLY.

namespace crema {

// A producer's decoder, resampler and buffers, and the steps of one sample.
struct image_transform::workspace {
  explicit workspace(const image_transform_options& options) : decoder(options.decode) {
    for (std::size_t c = 0; c < 3; ++c) {
      normalizers[c] = value_normalizer(options.mean[c], options.std[c]);
    }
  }

  // A sample whose geometry, flip and jitter are drawn from `rng`, once its header is read.
  template <class T>
  void drawn(const image_transform& owner, std::span<const std::byte> bytes, std::span<T> out,
             sample_rng& rng, std::string_view key) {
    const image_transform_options& options = owner.options_;
    run(owner, bytes, out, key,
        [&](const image_info& info, image_geometry& chosen, bool& flip, color_jitter_draw& jitter) {
          chosen = owner.geometry(info.height, info.width, rng);
          flip = options.mirror && rng.bernoulli(0.5);
          if (options.jitter.enabled()) jitter = draw_color_jitter(options.jitter, rng);
        });
  }

  // A sample whose geometry, flip and jitter are given.
  template <class T>
  void given(const image_transform& owner, std::span<const std::byte> bytes,
             const image_geometry& geometry, bool flip, std::span<T> out, std::string_view key,
             const color_jitter_draw& jitter) {
    run(owner, bytes, out, key,
        [&](const image_info&, image_geometry& chosen, bool& flipped, color_jitter_draw& drawn) {
          chosen = geometry;
          flipped = flip;
          drawn = jitter;
        });
  }

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
  void run(const image_transform& owner, std::span<const std::byte> bytes, std::span<T> out,
           std::string_view key, Choose&& choose) {
    const image_transform_options& options = owner.options_;
    const record_shape shape = owner.shape();
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
    resampling_sink sink{resampler, chosen, flip};
    decoder.decode(bytes, key, plan_for, sink);
    if (options.jitter.enabled()) {
      write_jittered(options, out, chosen, jitter);
    } else {
      write(options, out, chosen);
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
  [[nodiscard]] static image_geometry center_geometry(const image_transform_options& options,
                                                      std::size_t height, std::size_t width,
                                                      const resize_center_crop& eval) {
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
      if (factor == 8 || !options.decode.dct_scaling ||
          shrink_factor(plan_of(chosen), options.decode.detail) <= factor) {
        return chosen;
      }
    }
  }

  // The resampler's rows come channel by channel, already mirrored.
  template <class T>
  void write(const image_transform_options& options, std::span<T> out,
             const image_geometry& chosen) {
    const std::size_t channels = options.decode.channels;
    const std::size_t height = chosen.out_height;
    const std::size_t width = chosen.out_width;
    const bool chw = options.layout == pixel_layout::chw;
    resampler.finish([&](std::size_t row, const std::uint8_t* values) {
      for (std::size_t c = 0; c < channels; ++c) {
        const std::uint8_t* plane = values + c * width;
        if (chw) {
          T* to = out.data() + (c * height + row) * width;
          if constexpr (std::is_same_v<T, float>) {
            normalizers[c](plane, width, to);
          } else {
            std::copy(plane, plane + width, to);
          }
        } else {
          T* to = out.data() + row * width * channels + c;
          for (std::size_t x = 0; x < width; ++x) {
            if constexpr (std::is_same_v<T, float>) {
              to[x * channels] = normalizers[c](plane[x]);
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
  void write_jittered(const image_transform_options& options, std::span<T> out,
                      const image_geometry& chosen, const color_jitter_draw& jitter) {
    const std::size_t channels = options.decode.channels;
    const std::size_t height = chosen.out_height;
    const std::size_t width = chosen.out_width;
    const std::size_t pixels = height * width;
    jittered.resize(channels * pixels);
    resampler.finish([&](std::size_t row, const std::uint8_t* values) {
      for (std::size_t c = 0; c < channels; ++c) {
        float* to = jittered.data() + c * pixels + row * width;
        for (std::size_t x = 0; x < width; ++x) {
          to[x] = static_cast<float>(values[c * width + x]) / 255.0F;
        }
      }
    });
    apply_color_jitter(jitter, jittered, channels, options.decode.order);
    const bool chw = options.layout == pixel_layout::chw;
    for (std::size_t c = 0; c < channels; ++c) {
      for (std::size_t i = 0; i < pixels; ++i) {
        const float x = jittered[c * pixels + i];
        T& to = chw ? out[c * pixels + i] : out[i * channels + c];
        if constexpr (std::is_same_v<T, float>) {
          to = (x - options.mean[c]) / options.std[c];
        } else {
          to = static_cast<std::uint8_t>(std::lround(x * 255.0F));
        }
      }
    }
  }

  image_window_decoder decoder;
  band_resampler resampler;
  std::array<value_normalizer, 3> normalizers;
  std::vector<float> jittered;  // the jittered image, reused
};

CREMA_LIBRARY_INLINE image_transform::image_transform(image_transform_options options)
    : options_(std::move(options)) {
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
  }
  work_ = std::make_unique<workspace>(options_);
}

CREMA_LIBRARY_INLINE image_transform::image_transform(const image_transform& other)
    : image_transform(other.options_) {}

CREMA_LIBRARY_INLINE image_transform& image_transform::operator=(const image_transform& other) {
  if (this != &other) *this = image_transform(other.options_);
  return *this;
}

CREMA_LIBRARY_INLINE image_transform::image_transform(image_transform&& other) noexcept = default;
CREMA_LIBRARY_INLINE image_transform& image_transform::operator=(image_transform&& other) noexcept =
    default;
CREMA_LIBRARY_INLINE image_transform::~image_transform() = default;

CREMA_LIBRARY_INLINE image_geometry image_transform::geometry(std::size_t height, std::size_t width,
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
  return workspace::center_geometry(options_, height, width,
                                    std::get<resize_center_crop>(options_.geometry));
}

CREMA_LIBRARY_INLINE image_transform::workspace& image_transform::work() {
  // A transform moved from gets a workspace again (its options are still whole).
  if (!work_) work_ = std::make_unique<workspace>(options_);
  return *work_;
}

CREMA_LIBRARY_INLINE void image_transform::operator()(std::span<const std::byte> bytes,
                                                      std::span<float> out, sample_rng rng,
                                                      std::string_view key) {
  work().drawn(*this, bytes, out, rng, key);
}

CREMA_LIBRARY_INLINE void image_transform::operator()(std::span<const std::byte> bytes,
                                                      std::span<std::uint8_t> out, sample_rng rng,
                                                      std::string_view key) {
  work().drawn(*this, bytes, out, rng, key);
}

CREMA_LIBRARY_INLINE void image_transform::apply(std::span<const std::byte> bytes,
                                                 const image_geometry& geometry, bool flip,
                                                 std::span<float> out, std::string_view key,
                                                 const color_jitter_draw& jitter) {
  work().given(*this, bytes, geometry, flip, out, key, jitter);
}

CREMA_LIBRARY_INLINE void image_transform::apply(std::span<const std::byte> bytes,
                                                 const image_geometry& geometry, bool flip,
                                                 std::span<std::uint8_t> out, std::string_view key,
                                                 const color_jitter_draw& jitter) {
  work().given(*this, bytes, geometry, flip, out, key, jitter);
}

}  // namespace crema
