#pragma once

#include <crema/core/detail/host_device.hpp>
#include <crema/core/error.hpp>
#include <crema/core/record_shape.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

/// @file
/// What is left of a `caffe_transform` once a batch of `std::uint8_t` pixels holds each record's
/// crop and mirror: the mean and the scale, applied where the batch is used (on the device,
/// `cuda::caffe_normalize` in `<crema/io/caffe/cuda/caffe_normalize.cuh>`; here, on the host), with
/// the float path's arithmetic, so that the values are its own, bit for bit. Such a batch uploads a
/// quarter of the float path's bytes.

namespace crema {

/// @brief Each channel's mean and the scale: value `v` of channel `c` becomes
/// `(v - mean(c)) * scale`, in float, as `caffe_transform` computes it. Trivially copyable: a
/// kernel's argument. Made by `caffe_transform::normalization()`.
struct caffe_normalization {
  /// The most channels with a mean each (one mean for every channel has no limit).
  static constexpr std::size_t max_channels = 4;

  float means[max_channels] = {};  ///< channel c's mean, or `means[0]` for all with `one_mean`
  bool one_mean = true;            ///< one mean (or none: 0) for every channel
  float scale = 1.0f;

  /// @return value `value` of channel `channel`, normalised
  [[nodiscard]] CREMA_HOST_DEVICE float operator()(std::uint8_t value,
                                                   std::size_t channel) const noexcept {
    const float mean = one_mean ? means[0] : means[channel];
    return (static_cast<float>(value) - mean) * scale;
  }
};

/// @brief Normalises records of `shape` (channel-first bytes, `in`) into `out` on the host: the
/// values the float path gives. (The device does the same with `cuda::caffe_normalize`.)
/// @throws crema::length_error unless `in` and `out` hold the same whole number of records
inline void caffe_normalize_on_host(std::span<const std::uint8_t> in, std::span<float> out,
                                    record_shape shape, const caffe_normalization& normalization) {
  const std::size_t record = shape.elements();
  if (in.size() != out.size() || record == 0 || in.size() % record != 0) {
    detail::fail<length_error>(
        "caffe_normalize_on_host: {} bytes in and {} values out, records of {} values", in.size(),
        out.size(), record);
  }
  const std::size_t plane = shape.height * shape.width;
  for (std::size_t first = 0; first < in.size(); first += record) {
    for (std::size_t c = 0; c < shape.channels; ++c) {
      const std::size_t begin = first + c * plane;
      for (std::size_t i = begin; i < begin + plane; ++i) out[i] = normalization(in[i], c);
    }
  }
}

}  // namespace crema
