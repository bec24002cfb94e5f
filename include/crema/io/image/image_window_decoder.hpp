#pragma once

#include <crema/core/error.hpp>
#include <crema/io/decode_plan.hpp>
#include <crema/io/image/decode_options.hpp>
#include <crema/io/image/detail/libjpeg.hpp>
#include <crema/io/image/image_codec.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

/// @file
/// Decodes what a `decode_plan` asks for, and hands the rows to a transform in bands while they
/// are in the cache. JPEG through libjpeg's own API (libjpeg-turbo): only the window's iMCU
/// columns (`jpeg_crop_scanline`), no row above it decoded (`jpeg_skip_scanlines`) and none below
/// it, at 1/2, 1/4 or 1/8 of the size where the plan allows (the scaled IDCTs that are SIMD).
/// PNG is decoded whole, then handed over the same way. Component `crema::image`.

namespace crema {

/// @brief A transform's side of window decoding: `start` once with the decoded region's shape,
/// then `rows` for each band, top to bottom, every row once.
template <class Sink>
concept window_sink = requires(Sink& sink, const decoded_window& window, const pixel_rows& rows) {
  sink.start(window);
  sink.rows(rows);
};

/// @brief Decodes the window a `decode_plan` names from JPEG or PNG bytes, into buffers it reuses
/// (no allocation per image once they have grown). Errors name the record's key.
///
/// Not thread-safe: one per producer (a copy gets its own libjpeg state and buffers).
class image_window_decoder {
 public:
  explicit image_window_decoder(window_decode_options options = {})
      : options_(options), png_(png_options(options)) {
    if (options_.channels != 0 && options_.channels != 1 && options_.channels != 3) {
      detail::fail<config_error>("image_window_decoder: channels must be 0, 1 or 3, not {}",
                                 options_.channels);
    }
    options_.band_rows = std::max<std::size_t>(options_.band_rows, 1);
  }
  image_window_decoder(const image_window_decoder& other) : image_window_decoder(other.options_) {}
  image_window_decoder& operator=(const image_window_decoder& other) {
    if (this != &other) *this = image_window_decoder(other.options_);
    return *this;
  }
  image_window_decoder(image_window_decoder&&) noexcept = default;
  image_window_decoder& operator=(image_window_decoder&&) noexcept = default;
  ~image_window_decoder() = default;

  /// @brief Reads the header only: the format, the channels it will give, the full size.
  /// @throws crema::format_error naming `key` for bytes that are not an image it reads, or an
  ///         image over `max_pixels`
  [[nodiscard]] image_info info(std::span<const std::byte> bytes, std::string_view key) {
    const auto format = sniff_image_format(bytes);
    if (format == image_format::jpeg) {
      jpeg_state& state = jpeg();
      read_jpeg_header(state, bytes, key);
      const image_info info = jpeg_info(state);
      detail::libjpeg_abort(state.info);
      return info;
    }
    return png_.info(bytes, key);
  }

  /// @brief Decodes the plan's window and hands it to `sink` in bands of rows.
  /// @throws crema::format_error naming `key` for a corrupt, truncated or unsupported image (and
  ///         a JPEG with warnings, unless accepted); crema::config_error naming it if the plan's
  ///         window is empty or not inside the image; what `sink` throws
  template <window_sink Sink>
  void decode(std::span<const std::byte> bytes, const decode_plan& plan, std::string_view key,
              Sink& sink) {
    decode(
        bytes, key, [&](const image_info&) { return plan; }, sink);
  }

  /// @brief Reads the header, asks `plan_for(info)` for the plan (the header is read once), then
  /// decodes as above: what a transform whose window depends on the image's size calls.
  template <class PlanFor, window_sink Sink>
  requires std::is_invocable_r_v<decode_plan, PlanFor&, const image_info&>
  void decode(std::span<const std::byte> bytes, std::string_view key, PlanFor&& plan_for,
              Sink& sink) {
    if (sniff_image_format(bytes) == image_format::jpeg) {
      jpeg_state& state = jpeg();
      read_jpeg_header(state, bytes, key);
      abort_guard guard{state.info};
      const decode_plan plan = plan_for(jpeg_info(state));
      decode_jpeg(state, plan, key, sink);
    } else {
      const image_view<std::uint8_t> image = png_.decode(bytes, key);
      const decode_plan plan =
          plan_for(image_info{image_format::png, image.channels, image.height, image.width});
      deliver_whole(image, plan, key, sink);
    }
  }

  [[nodiscard]] const window_decode_options& options() const noexcept { return options_; }

 private:
  // libjpeg's decompressor and its error manager, which it points to: on the heap, so that it
  // stays where it is when the decoder moves. Made once, reused image after image.
  struct jpeg_state {
    jpeg_decompress_struct info{};
    detail::libjpeg_errors errors;
    bool created = false;
    jpeg_state() = default;
    jpeg_state(const jpeg_state&) = delete;
    jpeg_state& operator=(const jpeg_state&) = delete;
    ~jpeg_state() {
      if (created) detail::libjpeg_destroy(info);
    }
  };

  // Ends the decompression however the decoding ends, so the state serves the next image.
  struct abort_guard {
    jpeg_decompress_struct& info;
    ~abort_guard() { detail::libjpeg_abort(info); }
  };

  static image_decode_options png_options(const window_decode_options& options) {
    return {.channels = options.channels, .order = options.order, .max_pixels = options.max_pixels};
  }

  jpeg_state& jpeg() {
    if (!jpeg_) {
      auto made = std::make_unique<jpeg_state>();
      if (!detail::libjpeg_create(made->info, made->errors)) {
        detail::fail<format_error>("image_window_decoder: libjpeg could not start: {}",
                                   made->errors.message);
      }
      made->created = true;
      jpeg_ = std::move(made);
    }
    jpeg_->errors.accept_warnings = options_.accept_warnings;
    return *jpeg_;
  }

  [[noreturn]] static void jpeg_failed(jpeg_state& state, std::string_view key, const char* what) {
    const std::string why = state.errors.message;
    detail::libjpeg_abort(state.info);
    detail::fail<format_error>("image {}: JPEG {}: {}", key, what, why);
  }

  void read_jpeg_header(jpeg_state& state, std::span<const std::byte> bytes, std::string_view key) {
    state.errors.message[0] = '\0';
    if (!detail::libjpeg_read_header(state.info, state.errors,
                                     reinterpret_cast<const unsigned char*>(bytes.data()),
                                     bytes.size())) {
      jpeg_failed(state, key, "header");
    }
    const std::size_t width = state.info.image_width;
    const std::size_t height = state.info.image_height;
    if (width == 0 || height == 0 || height > options_.max_pixels / width) {
      detail::libjpeg_abort(state.info);
      detail::fail<format_error>("image {}: {} x {} pixels is empty or over the limit of {}", key,
                                 width, height, options_.max_pixels);
    }
  }

  [[nodiscard]] static bool is_cmyk(const jpeg_state& state) noexcept {
    return state.info.jpeg_color_space == JCS_CMYK || state.info.jpeg_color_space == JCS_YCCK;
  }
  [[nodiscard]] std::size_t channels_of(const jpeg_state& state) const noexcept {
    if (options_.channels != 0) return options_.channels;
    return state.info.jpeg_color_space == JCS_GRAYSCALE ? 1 : 3;
  }
  [[nodiscard]] image_info jpeg_info(const jpeg_state& state) const noexcept {
    return {image_format::jpeg, channels_of(state), state.info.image_height,
            state.info.image_width};
  }

  static void check_window(const decode_plan& plan, std::size_t height, std::size_t width,
                           std::string_view key) {
    const pixel_window& w = plan.window;
    if (w.height == 0 || w.width == 0 || w.top > height || w.height > height - w.top ||
        w.left > width || w.width > width - w.left) {
      detail::fail<config_error>(
          "image {}: the plan's window ({} x {} at row {}, column {}) is empty or outside the "
          "{} x {} image",
          key, w.height, w.width, w.top, w.left, height, width);
    }
  }

  // The header is read; the guard of the caller ends the decompression.
  template <class Sink>
  void decode_jpeg(jpeg_state& state, const decode_plan& plan, std::string_view key, Sink& sink) {
    jpeg_decompress_struct& info = state.info;
    check_window(plan, info.image_height, info.image_width, key);
    const pixel_window& window = plan.window;

    const std::size_t channels = channels_of(state);
    const bool cmyk = is_cmyk(state);
    if (cmyk) {
      info.out_color_space = JCS_CMYK;  // libjpeg does not convert CMYK: done here, by band
    } else if (channels == 1) {
      info.out_color_space = JCS_GRAYSCALE;
    } else {
      info.out_color_space = options_.order == channel_order::bgr ? JCS_EXT_BGR : JCS_EXT_RGB;
    }
    const std::size_t scale = options_.dct_scaling ? shrink_factor(plan, options_.detail) : 1;
    info.scale_num = 1;
    info.scale_denom = static_cast<unsigned>(scale);
    if (!detail::libjpeg_start(info, state.errors)) jpeg_failed(state, key, "start");

    // The region of the scaled image that holds the window.
    const std::size_t x0 = window.left / scale;
    const std::size_t x1 =
        std::min<std::size_t>((window.left + window.width + scale - 1) / scale, info.output_width);
    const std::size_t y0 = window.top / scale;
    const std::size_t y1 =
        std::min<std::size_t>((window.top + window.height + scale - 1) / scale, info.output_height);
    // Fancy upsampling (4:2:2, 4:2:0) blends each pixel with the next chroma sample, which a
    // region's edge column lacks: decoded there, the window's edge columns would differ from a
    // whole-image decode. So the region reaches past the window by a chroma sample and more on
    // both sides, where the image has columns; libjpeg then widens it to whole iMCU columns.
    const std::size_t margin = 2 * static_cast<std::size_t>(info.max_h_samp_factor);
    const std::size_t region_left = x0 > 0 ? x0 - std::min(x0, margin) : 0;
    const std::size_t region_right = std::min<std::size_t>(x1 + margin, info.output_width);
    JDIMENSION crop_left = static_cast<JDIMENSION>(region_left);
    JDIMENSION crop_width = static_cast<JDIMENSION>(region_right - region_left);
    if (region_left != 0 || region_right != info.output_width) {
      // Widened to whole iMCU columns: crop_left moves left, crop_width grows.
      if (!detail::libjpeg_crop(info, state.errors, crop_left, crop_width)) {
        jpeg_failed(state, key, "crop");
      }
    }
    if (y0 > 0 && !detail::libjpeg_skip(info, state.errors, static_cast<JDIMENSION>(y0))) {
      jpeg_failed(state, key, "skip");
    }

    const std::size_t components = static_cast<std::size_t>(info.out_color_components);
    // libjpeg-turbo's AVX2 colour conversion writes a row that starts on a 32-byte boundary
    // with non-temporal stores, around the cache, and the sink would then read it from memory.
    // Every row here starts 16 bytes past one: the stride is whole 32-byte steps, and the first
    // row is placed so.
    const std::size_t decoded_stride =
        (std::size_t{crop_width} * components + row_step - 1) / row_step * row_step;
    const std::size_t band = std::max<std::size_t>(
        options_.band_rows, static_cast<std::size_t>(std::max(info.rec_outbuf_height, 1)));
    grow(band_, decoded_stride * band + row_step);  // room to move the first row
    std::uint8_t* const first_row = place_first_row(band_.data());
    row_pointers_.resize(band);
    for (std::size_t r = 0; r < band; ++r) row_pointers_[r] = first_row + r * decoded_stride;
    const std::size_t offset = (x0 - crop_left) * components;  // the region inside a row
    const std::size_t region_width = x1 - x0;
    if (cmyk) grow(converted_, region_width * channels * band);

    sink.start(decoded_window{
        channels, y1 - y0, region_width, scale,
        static_cast<double>(window.top) / static_cast<double>(scale) - static_cast<double>(y0),
        static_cast<double>(window.left) / static_cast<double>(scale) - static_cast<double>(x0),
        static_cast<double>(window.height) / static_cast<double>(scale),
        static_cast<double>(window.width) / static_cast<double>(scale)});
    for (std::size_t row = y0; row < y1;) {
      const std::size_t want = std::min(band, y1 - row);
      std::size_t got = 0;
      while (got < want) {
        JDIMENSION read = 0;
        if (!detail::libjpeg_read(info, state.errors, row_pointers_.data() + got,
                                  static_cast<JDIMENSION>(want - got), read)) {
          jpeg_failed(state, key, "data");
        }
        if (read == 0) jpeg_failed(state, key, "data (no rows)");
        got += read;
      }
      pixel_rows rows{first_row + offset, decoded_stride, row - y0, got};
      if (cmyk) {
        for (std::size_t r = 0; r < got; ++r) {
          detail::from_inverted_cmyk(rows.row(r), region_width,
                                     converted_.data() + r * region_width * channels, channels,
                                     options_.order);
        }
        rows = {converted_.data(), region_width * channels, row - y0, got};
      }
      sink.rows(rows);
      row += got;
    }
  }

  template <class Sink>
  void deliver_whole(const image_view<std::uint8_t>& image, const decode_plan& plan,
                     std::string_view key, Sink& sink) {
    check_window(plan, image.height, image.width, key);
    const pixel_window& window = plan.window;
    sink.start(decoded_window{image.channels, window.height, window.width, 1, 0.0, 0.0,
                              static_cast<double>(window.height),
                              static_cast<double>(window.width)});
    const std::size_t stride = image.row_stride;
    const std::uint8_t* first = image.data + window.top * stride + window.left * image.channels;
    for (std::size_t row = 0; row < window.height; row += options_.band_rows) {
      const std::size_t count = std::min(options_.band_rows, window.height - row);
      sink.rows(pixel_rows{first + row * stride, stride, row, count});
    }
  }

  // Rows start `row_offset` bytes past a multiple of `row_step` (see decode_jpeg): the first
  // row is at most `row_step - 1` bytes into the buffer.
  static constexpr std::size_t row_step = 32;
  static constexpr std::size_t row_offset = 16;
  [[nodiscard]] static std::uint8_t* place_first_row(std::uint8_t* buffer) noexcept {
    const std::size_t misplaced = reinterpret_cast<std::uintptr_t>(buffer) % row_step;
    return buffer + (row_step + row_offset - misplaced) % row_step;
  }

  static void grow(std::vector<std::uint8_t>& buffer, std::size_t size) {
    if (buffer.size() < size) buffer.resize(size);
  }

  window_decode_options options_;
  std::unique_ptr<jpeg_state> jpeg_;
  image_decoder png_;                    // PNG, decoded whole (and JPEG headers it is asked for)
  std::vector<std::uint8_t> band_;       // rows as libjpeg writes them (whole iMCU columns)
  std::vector<std::uint8_t> converted_;  // CMYK bands, converted
  std::vector<JSAMPROW> row_pointers_;
};

}  // namespace crema
