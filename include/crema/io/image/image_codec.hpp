#pragma once

#include <crema/core/error.hpp>
#include <crema/io/image/decode_options.hpp>
#include <crema/io/image_view.hpp>

#include <spng.h>
#include <turbojpeg.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

/// @file
/// JPEG (libjpeg-turbo's TurboJPEG API) and PNG (libspng) records, decoded as Caffe's data layer
/// decodes them with OpenCV: 8-bit, BGR (or RGB, by option), grayscale images as one channel
/// unless three are asked for. Component `crema::image`.

namespace crema {

/// @brief The container an encoded image comes in.
enum class image_format { jpeg, png };

/// @brief What a header says: the format and the decoded dimensions.
struct image_info {
  image_format format = image_format::jpeg;
  std::size_t channels = 0;  ///< as the decoder will give them (after `channels` is applied)
  std::size_t height = 0;
  std::size_t width = 0;
};

/// @return the format `bytes` start like, or nothing if neither JPEG nor PNG
[[nodiscard]] inline std::optional<image_format> sniff_image_format(
    std::span<const std::byte> bytes) noexcept {
  static constexpr unsigned char jpeg[] = {0xff, 0xd8, 0xff};
  static constexpr unsigned char png[] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (bytes.size() >= sizeof jpeg && std::memcmp(bytes.data(), jpeg, sizeof jpeg) == 0) {
    return image_format::jpeg;
  }
  if (bytes.size() >= sizeof png && std::memcmp(bytes.data(), png, sizeof png) == 0) {
    return image_format::png;
  }
  return std::nullopt;
}

namespace detail {

struct tj_handle_deleter {
  void operator()(void* handle) const noexcept { tjDestroy(handle); }
};
using tj_handle = std::unique_ptr<void, tj_handle_deleter>;

struct spng_context_deleter {
  void operator()(spng_ctx* context) const noexcept { spng_ctx_free(context); }
};
using spng_context = std::unique_ptr<spng_ctx, spng_context_deleter>;

// Gray from 8-bit RGB with OpenCV's fixed-point BT.601 weights (14 fraction bits, rounded).
[[nodiscard]] constexpr std::uint8_t gray_of(unsigned red, unsigned green, unsigned blue) noexcept {
  return static_cast<std::uint8_t>((red * 4899 + green * 9617 + blue * 1868 + (1u << 13)) >> 14);
}

// One pixel into `channels` (1: gray; 3: in `order`) at index `i` of `out`.
inline void put_pixel(std::uint8_t* out, std::size_t i, std::size_t channels, channel_order order,
                      unsigned red, unsigned green, unsigned blue) noexcept {
  if (channels == 1) {
    out[i] = gray_of(red, green, blue);
    return;
  }
  const bool bgr = order == channel_order::bgr;
  out[i * 3] = static_cast<std::uint8_t>(bgr ? blue : red);
  out[i * 3 + 1] = static_cast<std::uint8_t>(green);
  out[i * 3 + 2] = static_cast<std::uint8_t>(bgr ? red : blue);
}

// `pixels` pixels of inverted CMYK (what Adobe writes and libjpeg returns) into `channels`.
inline void from_inverted_cmyk(const std::uint8_t* cmyk, std::size_t pixels, std::uint8_t* out,
                               std::size_t channels, channel_order order) noexcept {
  for (std::size_t i = 0; i < pixels; ++i) {
    const unsigned k = cmyk[i * 4 + 3];
    const auto ink = [k](unsigned value) { return k - (((255 - value) * k) >> 8); };
    put_pixel(out, i, channels, order, ink(cmyk[i * 4]), ink(cmyk[i * 4 + 1]),
              ink(cmyk[i * 4 + 2]));
  }
}

}  // namespace detail

/// @brief Decodes JPEG and PNG records into a buffer of its own that it reuses: no allocation
/// per image once the buffer has grown to the largest image. Errors name the record's key.
///
/// Not thread-safe: one per producer (copies get their own TurboJPEG handle and buffer, so a
/// transform holding one can be copied per producer).
class image_decoder {
 public:
  explicit image_decoder(image_decode_options options = {}) : options_(options) {
    if (options_.channels != 0 && options_.channels != 1 && options_.channels != 3) {
      detail::fail<config_error>("image_decoder: channels must be 0, 1 or 3, not {}",
                                 options_.channels);
    }
  }
  image_decoder(const image_decoder& other) : options_(other.options_) {}
  image_decoder& operator=(const image_decoder& other) {
    options_ = other.options_;
    return *this;
  }
  image_decoder(image_decoder&&) noexcept = default;
  image_decoder& operator=(image_decoder&&) noexcept = default;
  ~image_decoder() = default;

  /// @brief Reads the header only.
  /// @param key names the record in errors
  /// @throws crema::format_error naming `key` if the bytes are not a JPEG or PNG it can read,
  ///         or the image is larger than `max_pixels`
  [[nodiscard]] image_info info(std::span<const std::byte> bytes, std::string_view key) {
    const image_format format = format_of(bytes, key);
    return format == image_format::jpeg ? jpeg_header(bytes, key).info
                                        : png_header(bytes, key).info;
  }

  /// @brief Decodes an image into the decoder's buffer.
  /// @return a view of the decoded pixels (interleaved), valid until the next call
  /// @throws crema::format_error naming `key` for a corrupt, truncated or unsupported image
  image_view<std::uint8_t> decode(std::span<const std::byte> bytes, std::string_view key) {
    const image_format format = format_of(bytes, key);
    const image_info info =
        format == image_format::jpeg ? decode_jpeg(bytes, key) : decode_png(bytes, key);
    return image_view<std::uint8_t>::interleaved(pixels_.data(), info.channels, info.height,
                                                 info.width);
  }

  [[nodiscard]] const image_decode_options& options() const noexcept { return options_; }

 private:
  struct jpeg_facts {
    image_info info;
    int colorspace = 0;
  };
  struct png_facts {
    image_info info;
    bool gray = false;
  };

  image_format format_of(std::span<const std::byte> bytes, std::string_view key) const {
    const auto format = sniff_image_format(bytes);
    if (!format) {
      detail::fail<format_error>("image {}: its {} bytes are neither a JPEG nor a PNG", key,
                                 bytes.size());
    }
    return *format;
  }

  std::size_t channels_for(bool gray) const noexcept {
    return options_.channels != 0 ? options_.channels : (gray ? 1 : 3);
  }

  void check_size(const image_info& info, std::string_view key) const {
    if (info.width == 0 || info.height == 0 || info.height > options_.max_pixels / info.width) {
      detail::fail<format_error>("image {}: {} x {} pixels is empty or over the limit of {}", key,
                                 info.width, info.height, options_.max_pixels);
    }
  }

  void* jpeg_handle(std::string_view key) {
    if (!jpeg_) {
      jpeg_.reset(tjInitDecompress());
      if (!jpeg_) {
        detail::fail<format_error>("image {}: TurboJPEG could not start: {}", key,
                                   tjGetErrorStr2(nullptr));
      }
    }
    return jpeg_.get();
  }

  // A handle that failed may be left in a state the next image trips over: a new one is made.
  [[noreturn]] void jpeg_failed(std::string_view key, const char* what) {
    const std::string why = tjGetErrorStr2(jpeg_.get());
    jpeg_.reset();
    detail::fail<format_error>("image {}: JPEG {}: {}", key, what, why);
  }

  jpeg_facts jpeg_header(std::span<const std::byte> bytes, std::string_view key) {
    void* handle = jpeg_handle(key);
    int width = 0;
    int height = 0;
    int subsampling = 0;
    int colorspace = 0;
    if (tjDecompressHeader3(handle, as_uchars(bytes), bytes.size(), &width, &height, &subsampling,
                            &colorspace) != 0) {
      jpeg_failed(key, "header");
    }
    jpeg_facts facts;
    facts.colorspace = colorspace;
    facts.info = {image_format::jpeg, channels_for(colorspace == TJCS_GRAY),
                  static_cast<std::size_t>(height), static_cast<std::size_t>(width)};
    check_size(facts.info, key);
    return facts;
  }

  image_info decode_jpeg(std::span<const std::byte> bytes, std::string_view key) {
    const jpeg_facts facts = jpeg_header(bytes, key);
    const image_info& info = facts.info;
    const bool cmyk = facts.colorspace == TJCS_CMYK || facts.colorspace == TJCS_YCCK;
    // CMYK cannot be converted by libjpeg: decode the four channels, convert them here.
    const std::size_t decoded_channels = cmyk ? 4 : info.channels;
    const int format = cmyk ? TJPF_CMYK
                       : info.channels == 1
                           ? TJPF_GRAY
                           : (options_.order == channel_order::bgr ? TJPF_BGR : TJPF_RGB);
    std::uint8_t* target = grow(scratch_or_pixels(cmyk), info, decoded_channels);
    if (tjDecompress2(jpeg_.get(), as_uchars(bytes), bytes.size(), target,
                      static_cast<int>(info.width), 0, static_cast<int>(info.height), format,
                      TJFLAG_STOPONWARNING) != 0) {
      jpeg_failed(key, "data");
    }
    if (cmyk) from_cmyk(info);
    return info;
  }

  // Inverted CMYK (what Adobe writes and libjpeg returns) to the asked channels.
  void from_cmyk(const image_info& info) {
    std::uint8_t* out = grow(pixels_, info, info.channels);
    detail::from_inverted_cmyk(scratch_.data(), info.height * info.width, out, info.channels,
                               options_.order);
  }

  png_facts png_header(std::span<const std::byte> bytes, std::string_view key) {
    png_ = make_png_context(bytes, key);
    spng_ihdr header{};
    png_check(spng_get_ihdr(png_.get(), &header), key, "header");
    const bool gray = header.color_type == SPNG_COLOR_TYPE_GRAYSCALE ||
                      header.color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA;
    png_facts facts;
    facts.gray = gray;
    facts.info = {image_format::png, channels_for(gray), header.height, header.width};
    check_size(facts.info, key);
    return facts;
  }

  image_info decode_png(std::span<const std::byte> bytes, std::string_view key) {
    const png_facts facts = png_header(bytes, key);
    const image_info& info = facts.info;
    std::size_t size = 0;
    png_check(spng_decoded_image_size(png_.get(), SPNG_FMT_RGB8, &size), key, "size");
    std::uint8_t* rgb = grow(scratch_, info, 3);
    if (size != info.height * info.width * 3) {
      detail::fail<format_error>("image {}: PNG decodes to {} bytes, not {} x {} x 3", key, size,
                                 info.height, info.width);
    }
    png_check(spng_decode_image(png_.get(), rgb, size, SPNG_FMT_RGB8, 0), key, "data");
    png_.reset();
    std::uint8_t* out = grow(pixels_, info, info.channels);
    const std::size_t pixels = info.height * info.width;
    for (std::size_t i = 0; i < pixels; ++i) {
      const unsigned red = rgb[i * 3];
      const unsigned green = rgb[i * 3 + 1];
      const unsigned blue = rgb[i * 3 + 2];
      if (facts.gray && info.channels == 1) {
        out[i] = static_cast<std::uint8_t>(red);  // gray: the three are equal
      } else {
        put(out, i, info.channels, red, green, blue);
      }
    }
    return info;
  }

  detail::spng_context make_png_context(std::span<const std::byte> bytes, std::string_view key) {
    detail::spng_context context(spng_ctx_new(0));
    if (!context) detail::fail<format_error>("image {}: libspng could not start", key);
    png_check(spng_set_png_buffer(context.get(), bytes.data(), bytes.size()), key, "buffer");
    png_check(spng_set_image_limits(context.get(), spng_limit(), spng_limit()), key, "limits");
    return context;
  }
  [[nodiscard]] std::uint32_t spng_limit() const noexcept {
    return static_cast<std::uint32_t>(std::min<std::size_t>(options_.max_pixels, 0x7fffffff));
  }

  static void png_check(int code, std::string_view key, const char* what) {
    if (code != 0) {
      detail::fail<format_error>("image {}: PNG {}: {}", key, what, spng_strerror(code));
    }
  }

  // One pixel into the asked channels: gray, or three in the asked order.
  void put(std::uint8_t* out, std::size_t i, std::size_t channels, unsigned red, unsigned green,
           unsigned blue) const noexcept {
    detail::put_pixel(out, i, channels, options_.order, red, green, blue);
  }

  std::vector<std::uint8_t>& scratch_or_pixels(bool scratch) {
    return scratch ? scratch_ : pixels_;
  }

  static std::uint8_t* grow(std::vector<std::uint8_t>& buffer, const image_info& info,
                            std::size_t channels) {
    const std::size_t size = info.height * info.width * channels;  // checked by check_size
    if (buffer.size() < size) buffer.resize(size);
    return buffer.data();
  }

  static const unsigned char* as_uchars(std::span<const std::byte> bytes) noexcept {
    return reinterpret_cast<const unsigned char*>(bytes.data());
  }

  image_decode_options options_;
  detail::tj_handle jpeg_;
  detail::spng_context png_;
  std::vector<std::uint8_t> pixels_;   // what `decode` returns a view of
  std::vector<std::uint8_t> scratch_;  // RGB from PNG, CMYK from JPEG
};

/// @brief Encodes 8-bit pixels as a JPEG (for tools and tests: what convert_imageset --encoded
/// stores after a resize).
/// @param image   1 or 3 channels, any strides; three are taken in `order`
/// @param quality 1 to 100
/// @throws crema::config_error for another channel count; crema::format_error if TurboJPEG fails
inline void encode_jpeg(image_view<std::uint8_t> image, int quality, std::vector<std::byte>& out,
                        channel_order order = channel_order::bgr) {
  if (image.channels != 1 && image.channels != 3) {
    detail::fail<config_error>("encode_jpeg: {} channels; 1 or 3 can be encoded", image.channels);
  }
  std::vector<std::uint8_t> interleaved(image.elements());
  for (std::size_t h = 0; h < image.height; ++h) {
    for (std::size_t w = 0; w < image.width; ++w) {
      for (std::size_t c = 0; c < image.channels; ++c) {
        interleaved[(h * image.width + w) * image.channels + c] = image(c, h, w);
      }
    }
  }
  detail::tj_handle handle(tjInitCompress());
  if (!handle) detail::fail<format_error>("encode_jpeg: {}", tjGetErrorStr2(nullptr));
  unsigned char* encoded = nullptr;
  unsigned long size = 0;
  const bool gray = image.channels == 1;
  const int format = gray ? TJPF_GRAY : (order == channel_order::bgr ? TJPF_BGR : TJPF_RGB);
  if (tjCompress2(handle.get(), interleaved.data(), static_cast<int>(image.width), 0,
                  static_cast<int>(image.height), format, &encoded, &size,
                  gray ? TJSAMP_GRAY : TJSAMP_420, quality, 0) != 0) {
    const std::string why = tjGetErrorStr2(handle.get());
    tjFree(encoded);
    detail::fail<format_error>("encode_jpeg: {} x {}: {}", image.width, image.height, why);
  }
  const auto* first = reinterpret_cast<const std::byte*>(encoded);
  out.assign(first, first + size);
  tjFree(encoded);
}

/// @brief Encodes 8-bit pixels as a PNG (lossless: for tools, and tests that compare pixels).
/// @param image 1 or 3 channels, any strides; three are taken in `order`
/// @throws crema::config_error for another channel count; crema::format_error if libspng fails
inline void encode_png(image_view<std::uint8_t> image, std::vector<std::byte>& out,
                       channel_order order = channel_order::bgr) {
  if (image.channels != 1 && image.channels != 3) {
    detail::fail<config_error>("encode_png: {} channels; 1 or 3 can be encoded", image.channels);
  }
  std::vector<std::uint8_t> rows(image.elements());  // PNG stores RGB
  for (std::size_t h = 0; h < image.height; ++h) {
    for (std::size_t w = 0; w < image.width; ++w) {
      for (std::size_t c = 0; c < image.channels; ++c) {
        const std::size_t from = image.channels == 3 && order == channel_order::bgr ? 2 - c : c;
        rows[(h * image.width + w) * image.channels + c] = image(from, h, w);
      }
    }
  }
  detail::spng_context context(spng_ctx_new(SPNG_CTX_ENCODER));
  if (!context) detail::fail<format_error>("encode_png: libspng could not start");
  const auto check = [](int code) {
    if (code != 0) detail::fail<format_error>("encode_png: {}", spng_strerror(code));
  };
  check(spng_set_option(context.get(), SPNG_ENCODE_TO_BUFFER, 1));
  spng_ihdr header{};
  header.width = static_cast<std::uint32_t>(image.width);
  header.height = static_cast<std::uint32_t>(image.height);
  header.bit_depth = 8;
  header.color_type = static_cast<std::uint8_t>(image.channels == 1 ? SPNG_COLOR_TYPE_GRAYSCALE
                                                                    : SPNG_COLOR_TYPE_TRUECOLOR);
  check(spng_set_ihdr(context.get(), &header));
  check(spng_encode_image(context.get(), rows.data(), rows.size(), SPNG_FMT_PNG,
                          SPNG_ENCODE_FINALIZE));
  std::size_t size = 0;
  int error = 0;
  void* encoded = spng_get_png_buffer(context.get(), &size, &error);
  check(error);
  const auto* first = static_cast<const std::byte*>(encoded);
  out.assign(first, first + size);
  std::free(encoded);
}

}  // namespace crema
