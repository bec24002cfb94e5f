#pragma once

#include <cstddef>
#include <span>

namespace crema {

/// @brief A read-only view of an image's values with strides, so that one transform reads a
/// Datum's channel-first pixels and a decoder's interleaved ones alike, without a copy to put
/// them in one order first.
///
/// Value (c, h, w) is at `data[c * channel_stride + h * row_stride + w * column_stride]`. The
/// view owns nothing; cheap to copy; thread-safe to read.
/// @tparam T the element type (std::uint8_t for pixels, float for float records)
template <class T>
struct image_view {
  const T* data = nullptr;
  std::size_t channels = 0;
  std::size_t height = 0;
  std::size_t width = 0;
  std::size_t channel_stride = 0;
  std::size_t row_stride = 0;
  std::size_t column_stride = 0;

  /// @brief Channel-first values (C x H x W), as a Datum holds them.
  [[nodiscard]] static constexpr image_view planar(const T* data, std::size_t channels,
                                                   std::size_t height, std::size_t width) noexcept {
    return {data, channels, height, width, height * width, width, 1};
  }
  /// @brief Interleaved values (H x W x C), as image decoders give them.
  [[nodiscard]] static constexpr image_view interleaved(const T* data, std::size_t channels,
                                                        std::size_t height,
                                                        std::size_t width) noexcept {
    return {data, channels, height, width, 1, width * channels, channels};
  }

  /// @return value (c, h, w)
  [[nodiscard]] constexpr T operator()(std::size_t c, std::size_t h, std::size_t w) const noexcept {
    return data[c * channel_stride + h * row_stride + w * column_stride];
  }
  /// @return channels x height x width
  [[nodiscard]] constexpr std::size_t elements() const noexcept {
    return channels * height * width;
  }
  /// @return whether the values are channel-first and contiguous
  [[nodiscard]] constexpr bool is_planar() const noexcept {
    return column_stride == 1 && row_stride == width && channel_stride == height * width;
  }

  /// @brief Copies the values into `out` channel-first (C x H x W); `out` holds `elements()`.
  template <class U>
  void copy_planar(std::span<U> out) const noexcept {
    std::size_t next = 0;
    for (std::size_t c = 0; c < channels; ++c) {
      for (std::size_t h = 0; h < height; ++h) {
        for (std::size_t w = 0; w < width; ++w) out[next++] = static_cast<U>((*this)(c, h, w));
      }
    }
  }
};

}  // namespace crema
