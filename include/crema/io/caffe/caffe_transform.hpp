#pragma once

#include <crema/core/detail/cpu_features.hpp>
#include <crema/core/error.hpp>
#include <crema/core/record_shape.hpp>
#include <crema/io/caffe/blob_proto.hpp>
#include <crema/io/caffe/caffe_normalization.hpp>
#include <crema/io/detail/rgb_split.hpp>
#include <crema/io/image_view.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
// AVX2 where the processor has it, chosen at run time (core/detail/cpu_features.hpp).
#if defined(CREMA_X86_KERNELS)
#include <immintrin.h>
#endif

namespace crema {

namespace detail {

/// The instructions `caffe_transform` converts rows of bytes with: the best the processor has
/// (checked once), or lower where a test asks for it (`byte_rows()` is the ceiling).
enum class byte_row_isa { plain, sse2, avx2 };

[[nodiscard]] inline byte_row_isa best_byte_row_isa() noexcept {
#if defined(CREMA_X86_KERNELS)
  if (host_cpu().avx2) return byte_row_isa::avx2;
#endif
#if defined(__SSE2__)
  return byte_row_isa::sse2;
#else
  return byte_row_isa::plain;
#endif
}

/// The ceiling itself, for tests that run each kind of row: thread-safe; lowering it changes
/// no result, only the speed (every kind computes the same bits).
[[nodiscard]] inline std::atomic<byte_row_isa>& byte_rows() noexcept {
  static std::atomic<byte_row_isa> ceiling{best_byte_row_isa()};
  return ceiling;
}

}  // namespace detail

/// @brief What Caffe's `TransformationParameter` says, less the parts Caffe deprecated.
struct caffe_transform_options {
  std::size_t crop_size = 0;  ///< 0: no crop
  bool mirror = false;        ///< flip left-right at random (in training)
  /// Training draws the crop's place and the mirror at random; testing crops the centre and
  /// never mirrors (Caffe mirrors in testing too when `mirror` is set; nobody wants that).
  bool training = true;
  float scale = 1.0f;  ///< applied after the mean is subtracted
  /// The mean to subtract per channel: one value per channel, or one for all of them.
  std::vector<float> mean_values = {};
  /// A mean image (what compute_image_mean writes, [1, C, H, W] or [C, H, W]) subtracted pixel by
  /// pixel before the crop, as Caffe does. Not with `mean_values`.
  std::shared_ptr<const blob> mean_file = {};
  /// Records whose output is at least this many bytes are written past the caches (non-temporal
  /// stores; from bytes, with AVX2, into 16-byte aligned rows of a multiple of 4 values), and each
  /// line written costs no read first. Worth it only where the batch memory written has left the
  /// caches anyway: batches larger than the cache, into slots the consumer held a while (an
  /// upload still running). Where the consumer keeps up, producers refill the slot just given
  /// back, still in the cache (`pipeline_stats::warm_refills`), and streaming would push it out;
  /// hence none by default. Not into the pinned memory of device batches either: there streamed
  /// stores are many times slower than cached ones (docs/performance.md, "On a GPU").
  /// The values are the same bits either way. 0 streams every record.
  std::size_t stream_from_bytes = std::numeric_limits<std::size_t>::max();
};

/// @brief Where a record's output is cut from, and whether it is mirrored: the record's random
/// choices (`caffe_transform::draw_crop`).
struct caffe_crop {
  std::size_t top = 0;   ///< the input row of the output's first row
  std::size_t left = 0;  ///< the input column of the output's first column (before mirroring)
  bool mirror = false;
};

/// @brief Caffe's `DataTransformer`: crop (random in training, the centre in testing), mirror,
/// mean (an image or per-channel values) and scale, from 8-bit or float values in any layout
/// into float values channel-first; or the crop and mirror alone from 8-bit values into bytes,
/// whose mean and scale `normalization()` applies where they are used (on the device).
///
/// Output (c, h, w) is `(in(c, h + dy, x) - mean) * scale` with x = w + dx, or
/// x = dx + width - 1 - w when mirrored, where the mean is the mean image's value at
/// (c, h + dy, x) or channel c's value. Random choices come only from the generator given (a
/// record's `sample_context::rng()`), drawn in this order: the mirror (when asked for), then dy,
/// then dx (in training, when cropping). Immutable once made: thread-safe, and cheap to copy
/// (the mean image is shared).
class caffe_transform {
 public:
  /// @throws crema::config_error naming the option: both kinds of mean, a scale that is not
  ///         finite, or a mean file that is not an image
  explicit caffe_transform(caffe_transform_options options = {}) : options_(std::move(options)) {
    if (options_.mean_file && !options_.mean_values.empty()) {
      detail::fail<config_error>(
          "caffe_transform: a mean file and {} mean values were given; one kind of mean only",
          options_.mean_values.size());
    }
    if (!std::isfinite(options_.scale)) {
      detail::fail<config_error>("caffe_transform: scale {} is not finite", options_.scale);
    }
    if (options_.mean_file) {
      const auto& shape = options_.mean_file->shape;
      const bool image = (shape.size() == 4 && shape[0] == 1) || shape.size() == 3;
      if (!image) {
        detail::fail<config_error>(
            "caffe_transform: the mean file's shape has {} dimensions; [1, C, H, W] or [C, H, W] "
            "expected",
            shape.size());
      }
      const std::size_t first = shape.size() - 3;
      mean_shape_ = {static_cast<std::size_t>(shape[first]),
                     static_cast<std::size_t>(shape[first + 1]),
                     static_cast<std::size_t>(shape[first + 2])};
    }
  }

  /// @return the dimensions an input of `channels` x `height` x `width` comes out in
  [[nodiscard]] record_shape output_shape(std::size_t channels, std::size_t height,
                                          std::size_t width) const noexcept {
    if (options_.crop_size == 0) return {channels, height, width};
    return {channels, options_.crop_size, options_.crop_size};
  }

  /// @brief Transforms `in` into `out` (channel-first, `output_shape(...)` of it).
  /// @param rng the record's generator (its draws are used up)
  /// @param key names the record in errors
  /// @throws crema::format_error naming `key` if the record is smaller than the crop, or its
  ///         shape is not the mean file's or has more channels than mean values;
  ///         crema::length_error if `out` is not the output's size
  template <class T>
  void operator()(image_view<T> in, std::span<float> out, sample_rng& rng,
                  std::string_view key = {}) const {
    const record_shape input{in.channels, in.height, in.width};
    check_input(input, key);
    check_output(input, out);
    const caffe_crop crop = draw_crop(input, rng);
    const record_shape shape = output_shape(in.channels, in.height, in.width);
    image_view<T> rows = in;
    rows.data += crop.top * in.row_stride + crop.left * in.column_stride;
    rows.height = shape.height;
    rows.width = shape.width;
    write_rows(rows, 0, crop, input, out);
  }

  /// @brief The crop and mirror alone, into bytes: what a batch of `std::uint8_t` pixels holds,
  /// the mean and scale left to where it is used (`normalization()`). Output (c, h, w) is
  /// `in(c, h + dy, x)`, x as above, from the same draws: normalised, the float overload's values
  /// bit for bit.
  /// @throws as the float overload, and crema::config_error with a mean file (subtracted before
  ///         the crop, pixel by pixel: only the float path does that)
  void operator()(image_view<std::uint8_t> in, std::span<std::uint8_t> out, sample_rng& rng,
                  std::string_view key = {}) const {
    check_byte_output();
    const record_shape input{in.channels, in.height, in.width};
    check_input(input, key);
    check_output_size(input, out.size());
    const caffe_crop crop = draw_crop(input, rng);
    const record_shape shape = output_shape(in.channels, in.height, in.width);
    image_view<std::uint8_t> rows = in;
    rows.data += crop.top * in.row_stride + crop.left * in.column_stride;
    rows.height = shape.height;
    rows.width = shape.width;
    write_rows(rows, 0, crop, input, out);
  }

  /// @brief The mean and scale that a batch of bytes (the overload above) is left to apply.
  /// @throws crema::config_error with a mean file, or per-channel means for more than
  ///         `caffe_normalization::max_channels` channels
  [[nodiscard]] caffe_normalization normalization() const {
    check_byte_output();
    caffe_normalization normalization;
    normalization.scale = options_.scale;
    normalization.one_mean = options_.mean_values.size() <= 1;
    for (std::size_t c = 0; c < options_.mean_values.size(); ++c) {
      normalization.means[c] = options_.mean_values[c];
    }
    return normalization;
  }
  /// @brief Checks that this transform can write bytes (the overload above).
  /// @throws crema::config_error as `normalization()` does
  void check_byte_output() const {
    if (options_.mean_file) {
      detail::fail<config_error>(
          "caffe_transform: a mean file is subtracted before the crop, pixel by pixel; batches "
          "of bytes take mean values only");
    }
    if (options_.mean_values.size() > caffe_normalization::max_channels) {
      detail::fail<config_error>(
          "caffe_transform: {} mean values; batches of bytes take at most {} (or one for all "
          "channels)",
          options_.mean_values.size(), caffe_normalization::max_channels);
    }
  }

  /// @brief Checks that records of `input`'s shape can be transformed: what `operator()`
  /// checks first, for callers that decode only the crop and so never hold the whole record.
  /// @throws crema::format_error naming `key`, as `operator()` does
  void check_input(const record_shape& input, std::string_view key) const {
    if (input.height < options_.crop_size || input.width < options_.crop_size) {
      detail::fail<format_error>("record {}: {} x {} x {} is smaller than the crop {}", key,
                                 input.channels, input.height, input.width, options_.crop_size);
    }
    if (options_.mean_file && input != mean_shape_) {
      detail::fail<format_error>("record {}: {} x {} x {} is not the mean file's {} x {} x {}", key,
                                 input.channels, input.height, input.width, mean_shape_.channels,
                                 mean_shape_.height, mean_shape_.width);
    }
    const std::size_t values = options_.mean_values.size();
    if (values > 1 && values != input.channels) {
      detail::fail<format_error>("record {}: {} channels, but {} mean values were given", key,
                                 input.channels, values);
    }
  }

  /// @brief A record's random choices, drawn from its generator in `operator()`'s order: the
  /// mirror (when asked for), then the crop's row and column (in training, when cropping). In
  /// testing the crop is the centre and nothing is drawn.
  /// @pre `check_input(input)` passed
  [[nodiscard]] caffe_crop draw_crop(const record_shape& input, sample_rng& rng) const noexcept {
    caffe_crop crop;
    crop.mirror = options_.training && options_.mirror && rng.below(2) == 1;
    const record_shape shape = output_shape(input.channels, input.height, input.width);
    if (options_.crop_size != 0) {
      if (options_.training) {
        crop.top = static_cast<std::size_t>(rng.below(input.height - shape.height + 1));
        crop.left = static_cast<std::size_t>(rng.below(input.width - shape.width + 1));
      } else {
        crop.top = (input.height - shape.height) / 2;
        crop.left = (input.width - shape.width) / 2;
      }
    }
    return crop;
  }

  /// @brief Writes output rows [`first`, `first + rows.height`) of one record: what a decoder
  /// that hands over a few rows at a time calls while they are in the cache. Value (c, i, w) of
  /// `rows` is the input's (c, crop.top + first + i, crop.left + w); `rows.width` is the
  /// output's width. The result is `operator()`'s, bit for bit, however the rows are split.
  /// @param input the whole record's shape (`check_input` passed for it)
  /// @param out   the whole record's output (`output_shape(input)` of it)
  /// Thread-safe, never blocks, allocates nothing.
  template <class T>
  void write_rows(image_view<T> rows, std::size_t first, const caffe_crop& crop,
                  const record_shape& input, std::span<float> out) const noexcept {
    const record_shape shape = output_shape(input.channels, input.height, input.width);
    const float scale = options_.scale;
    const float* mean_image = options_.mean_file ? options_.mean_file->data.data() : nullptr;
    const std::size_t mean_offset = (crop.top + first) * input.width + crop.left;
    const std::size_t plane_size = shape.height * shape.width;
    float* const first_row = out.data() + first * shape.width;
    const auto isa = detail::byte_rows().load(std::memory_order_relaxed);
    const bool stream = streams(out, shape.width);
#if defined(CREMA_X86_KERNELS)
    if constexpr (std::is_same_v<T, std::uint8_t>) {
      if (rows.channels == 3 && rows.column_stride == 3 && rows.channel_stride == 1 &&
          isa == detail::byte_row_isa::avx2) {
        std::array<const float*, 3> means{};
        std::array<float, 3> channel_means{};
        std::array<float*, 3> planes{};
        for (std::size_t c = 0; c < 3; ++c) {
          channel_means[c] = mean_of_channel(c);
          means[c] = mean_image != nullptr
                         ? mean_image + c * input.height * input.width + mean_offset
                         : &channel_means[c];
          planes[c] = first_row + c * plane_size;
        }
        const auto run = [&]<bool PerPixelMean, bool Mirror>() {
          if (stream) {
            interleaved3_avx2<PerPixelMean, Mirror, true>(rows.data, rows.row_stride, means,
                                                          input.width, planes, shape.width,
                                                          rows.height, scale);
          } else {
            interleaved3_avx2<PerPixelMean, Mirror, false>(rows.data, rows.row_stride, means,
                                                           input.width, planes, shape.width,
                                                           rows.height, scale);
          }
        };
        if (mean_image != nullptr) {
          crop.mirror ? run.template operator()<true, true>()
                      : run.template operator()<true, false>();
        } else {
          crop.mirror ? run.template operator()<false, true>()
                      : run.template operator()<false, false>();
        }
        if (stream) _mm_sfence();
        return;
      }
    }
#endif
    for (std::size_t c = 0; c < rows.channels; ++c) {
      const float channel_mean = mean_of_channel(c);
      const T* from = rows.data + c * rows.channel_stride;
      float* to = first_row + c * plane_size;
      if (mean_image != nullptr) {
        plane<true>(from, rows.row_stride, rows.column_stride,
                    mean_image + c * input.height * input.width + mean_offset, input.width, to,
                    shape.width, rows.height, scale, crop.mirror, stream, isa);
      } else {
        plane<false>(from, rows.row_stride, rows.column_stride, &channel_mean, 0, to, shape.width,
                     rows.height, scale, crop.mirror, stream, isa);
      }
    }
#if defined(CREMA_X86_KERNELS)
    // Streamed lines are not ordered with later stores: the batch is handed on only after them.
    if (stream) _mm_sfence();
#endif
  }

  /// @brief As the float `write_rows`, into bytes: the crop and mirror alone (see the byte
  /// `operator()`). Thread-safe, never blocks, allocates nothing.
  void write_rows(image_view<std::uint8_t> rows, std::size_t first, const caffe_crop& crop,
                  const record_shape& input, std::span<std::uint8_t> out) const noexcept {
    const record_shape shape = output_shape(input.channels, input.height, input.width);
    const std::size_t width = shape.width;
    const std::size_t plane_size = shape.height * width;
    const auto isa = detail::byte_rows().load(std::memory_order_relaxed);
    for (std::size_t c = 0; c < rows.channels; ++c) {
      for (std::size_t h = 0; h < rows.height; ++h) {
        const std::uint8_t* from = rows.data + c * rows.channel_stride + h * rows.row_stride;
        std::uint8_t* to = out.data() + c * plane_size + (first + h) * width;
        const std::size_t step = rows.column_stride;
        if (step == 1) {
          if (crop.mirror) {
            byte_row_copy<true>(from, to, width, isa);
          } else {
            byte_row_copy<false>(from, to, width, isa);
          }
        } else if (crop.mirror) {
          for (std::size_t w = 0; w < width; ++w) to[width - 1 - w] = from[w * step];
        } else {
          for (std::size_t w = 0; w < width; ++w) to[w] = from[w * step];
        }
      }
    }
  }

  [[nodiscard]] const caffe_transform_options& options() const noexcept { return options_; }

 private:
  // Whether a record's output goes past the caches (`stream_from_bytes`); only the AVX2 planes
  // of bytes stream, so the rows must suit them.
  bool streams(std::span<const float> out, std::size_t width) const noexcept {
#if defined(CREMA_X86_KERNELS)
    return out.size_bytes() >= options_.stream_from_bytes && width % 4 == 0 &&
           reinterpret_cast<std::uintptr_t>(out.data()) % 16 == 0;
#else
    (void)out;
    (void)width;
    return false;
#endif
  }

  // A channel's `height` output rows, `width` values each, from rows `from_stride` apart; the
  // mean is the mean image's first row of the crop (`mean_stride` apart) or the channel's mean.
  // Bytes of unit stride go to AVX2 planes where `isa` allows, else row by row.
  template <bool PerPixelMean, class T>
  static void plane(const T* from, std::size_t from_stride, std::size_t step, const float* mean,
                    std::size_t mean_stride, float* to, std::size_t width, std::size_t height,
                    float scale, bool mirror, bool stream, detail::byte_row_isa isa) noexcept {
#if defined(CREMA_X86_KERNELS)
    if constexpr (std::is_same_v<T, std::uint8_t>) {
      if (step == 1 && isa == detail::byte_row_isa::avx2) {
        const auto run = [&]<bool Mirror, bool Stream>() {
          byte_plane_avx2<PerPixelMean, Mirror, Stream>(from, from_stride, mean, mean_stride, to,
                                                        width, height, scale);
        };
        if (stream) {
          return mirror ? run.template operator()<true, true>()
                        : run.template operator()<false, true>();
        }
        return mirror ? run.template operator()<true, false>()
                      : run.template operator()<false, false>();
      }
    }
#endif
    (void)stream;
    for (std::size_t h = 0; h < height; ++h) {
      row<PerPixelMean>(from + h * from_stride, step, PerPixelMean ? mean + h * mean_stride : mean,
                        to + h * width, width, scale, mirror, isa);
    }
  }

  // One output row: `width` values `(from[w * step] - mean) * scale`, reversed when mirrored,
  // where the mean is `mean[w]` (a mean image's row) or `*mean` (a channel's). The unit-stride
  // cases (channel-first records) are written apart so that they vectorize.
  template <bool PerPixelMean, class T>
  static void row(const T* from, std::size_t step, const float* mean, float* to, std::size_t width,
                  float scale, bool mirror, detail::byte_row_isa isa) noexcept {
    const auto mean_at = [mean](std::size_t w) {
      if constexpr (PerPixelMean) {
        return mean[w];
      } else {
        (void)w;
        return *mean;
      }
    };
    if constexpr (std::is_same_v<T, std::uint8_t>) {
#if defined(__SSE2__)
      if (step == 1 && isa != detail::byte_row_isa::plain) {
        return byte_row<PerPixelMean>(from, mean, to, width, scale, mirror);
      }
#endif
    }
    (void)isa;
    if (step == 1) {
      for (std::size_t w = 0; w < width; ++w) {
        to[w] = (static_cast<float>(from[w]) - mean_at(w)) * scale;
      }
      // A reversed loop does not vectorize; reversing the row in L1 afterwards costs little.
      if (mirror) std::reverse(to, to + width);
    } else if (!mirror) {
      for (std::size_t w = 0; w < width; ++w) {
        to[w] = (static_cast<float>(from[w * step]) - mean_at(w)) * scale;
      }
    } else {
      for (std::size_t w = 0; w < width; ++w) {
        to[width - 1 - w] = (static_cast<float>(from[w * step]) - mean_at(w)) * scale;
      }
    }
  }

#if defined(__SSE2__)
  // `row` for bytes of unit stride (channel-first records, the common case), with SSE2, which
  // every x86-64 processor has: sixteen, then four values a step, a mirrored row stored reversed
  // as it goes. Compilers vectorize the plain loop by sixteen bytes and finish a 28-value row
  // (a CIFAR crop) one value at a time, and GCC 12 at -O2 does not vectorize it at all. The
  // arithmetic is the plain loop's, in its order: the same bits.
  template <bool PerPixelMean>
  static void byte_row(const std::uint8_t* from, const float* mean, float* to, std::size_t width,
                       float scale, bool mirror) noexcept {
    const __m128i zero = _mm_setzero_si128();
    const __m128 scales = _mm_set1_ps(scale);
    const __m128 channel_mean = _mm_set1_ps(*mean);
    // Values w .. w + 3 from four 32-bit integers.
    const auto put = [&](std::size_t w, __m128i integers) {
      __m128 means = channel_mean;
      if constexpr (PerPixelMean) means = _mm_loadu_ps(mean + w);
      const __m128 values = _mm_mul_ps(_mm_sub_ps(_mm_cvtepi32_ps(integers), means), scales);
      if (mirror) {
        _mm_storeu_ps(to + width - w - 4, _mm_shuffle_ps(values, values, _MM_SHUFFLE(0, 1, 2, 3)));
      } else {
        _mm_storeu_ps(to + w, values);
      }
    };
    std::size_t w = 0;
    for (; w + 16 <= width; w += 16) {
      const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + w));
      const __m128i low = _mm_unpacklo_epi8(bytes, zero);
      const __m128i high = _mm_unpackhi_epi8(bytes, zero);
      put(w, _mm_unpacklo_epi16(low, zero));
      put(w + 4, _mm_unpackhi_epi16(low, zero));
      put(w + 8, _mm_unpacklo_epi16(high, zero));
      put(w + 12, _mm_unpackhi_epi16(high, zero));
    }
    for (; w + 4 <= width; w += 4) {
      std::int32_t four = 0;
      std::memcpy(&four, from + w, sizeof four);
      put(w, _mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(four), zero), zero));
    }
    for (; w < width; ++w) {
      const float pixel_mean = PerPixelMean ? mean[w] : *mean;
      to[mirror ? width - 1 - w : w] = (static_cast<float>(from[w]) - pixel_mean) * scale;
    }
  }
#endif

  // A row of bytes of unit stride (channel-first records) copied, or mirrored (`to[width - 1 -
  // w] = from[w]`). With SSE2 sixteen bytes a step, the last step moved back to end at the row's
  // end where the width is not a multiple of 16 (its first bytes are written twice, the same
  // values); a mirrored step reverses its register (the dwords, the words in each, the bytes in
  // each word). Compilers leave the reversed loop scalar, a byte a cycle, and a memcpy a row is a
  // call into the C library for a few dozen bytes: both slower than the float rows.
  template <bool Mirror>
  static void byte_row_copy(const std::uint8_t* from, std::uint8_t* to, std::size_t width,
                            detail::byte_row_isa isa) noexcept {
#if defined(__SSE2__)
    if (width >= 16 && isa != detail::byte_row_isa::plain) {
      for (std::size_t w = 0;; w += 16) {
        if (w + 16 > width) w = width - 16;
        __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + w));
        if constexpr (Mirror) {
          bytes = _mm_shuffle_epi32(bytes, _MM_SHUFFLE(0, 1, 2, 3));
          bytes = _mm_shufflelo_epi16(bytes, _MM_SHUFFLE(2, 3, 0, 1));
          bytes = _mm_shufflehi_epi16(bytes, _MM_SHUFFLE(2, 3, 0, 1));
          bytes = _mm_or_si128(_mm_slli_epi16(bytes, 8), _mm_srli_epi16(bytes, 8));
          _mm_storeu_si128(reinterpret_cast<__m128i*>(to + width - w - 16), bytes);
        } else {
          _mm_storeu_si128(reinterpret_cast<__m128i*>(to + w), bytes);
        }
        if (w + 16 == width) return;
      }
    }
#endif
    (void)isa;
    for (std::size_t w = 0; w < width; ++w) to[Mirror ? width - 1 - w : w] = from[w];
  }

#if defined(CREMA_X86_KERNELS)
  // Eight values to `to`: through the caches, or past them in two 16-byte non-temporal stores
  // (`to` 16-byte aligned).
  template <bool Stream>
  [[gnu::target("avx2")]] static void store8(float* to, __m256 values) noexcept {
    if constexpr (Stream) {
      _mm_stream_ps(to, _mm256_castps256_ps128(values));
      _mm_stream_ps(to + 4, _mm256_extractf128_ps(values, 1));
    } else {
      _mm256_storeu_ps(to, values);
    }
  }

  // A channel's `height` rows of bytes of unit stride with AVX2: eight values a step (then four,
  // then one), the arithmetic of the plain loop in its order, so the same bits (no fused
  // multiply-add: `target` asks for AVX2 alone). A whole plane a call, so that the constants are
  // set and the call made once per channel, not once per row. `mean` is the mean image's first
  // row of the crop (`mean_stride` apart) or the channel's mean. With `Stream`, the rows (16-byte
  // aligned, a multiple of 4 values long) are written past the caches.
  template <bool PerPixelMean, bool Mirror, bool Stream>
  [[gnu::target("avx2")]] static void byte_plane_avx2(const std::uint8_t* from,
                                                      std::size_t from_stride, const float* mean,
                                                      std::size_t mean_stride, float* to,
                                                      std::size_t width, std::size_t height,
                                                      float scale) noexcept {
    const __m256 scales = _mm256_set1_ps(scale);
    const __m256 channel_mean = _mm256_set1_ps(*mean);
    const __m256i reversed = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    for (std::size_t h = 0; h < height; ++h, from += from_stride, to += width) {
      const float* row_mean = PerPixelMean ? mean + h * mean_stride : mean;
      std::size_t w = 0;
      for (; w + 8 <= width; w += 8) {
        const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(from + w));
        __m256 means = channel_mean;
        if constexpr (PerPixelMean) means = _mm256_loadu_ps(row_mean + w);
        const __m256 values = _mm256_mul_ps(
            _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)), means), scales);
        if constexpr (Mirror) {
          store8<Stream>(to + width - w - 8, _mm256_permutevar8x32_ps(values, reversed));
        } else {
          store8<Stream>(to + w, values);
        }
      }
      if (w + 4 <= width) {
        std::int32_t four = 0;
        std::memcpy(&four, from + w, sizeof four);
        __m128 means = _mm256_castps256_ps128(channel_mean);
        if constexpr (PerPixelMean) means = _mm_loadu_ps(row_mean + w);
        const __m128 values = _mm_mul_ps(
            _mm_sub_ps(_mm_cvtepi32_ps(_mm_cvtepu8_epi32(_mm_cvtsi32_si128(four))), means),
            _mm256_castps256_ps128(scales));
        if constexpr (Mirror) {
          _mm_storeu_ps(to + width - w - 4,
                        _mm_shuffle_ps(values, values, _MM_SHUFFLE(0, 1, 2, 3)));
        } else {
          _mm_storeu_ps(to + w, values);
        }
        w += 4;
      }
      for (; w < width; ++w) {
        const float pixel_mean = PerPixelMean ? row_mean[w] : *mean;
        to[Mirror ? width - 1 - w : w] = (static_cast<float>(from[w]) - pixel_mean) * scale;
      }
    }
  }
#endif

#if defined(CREMA_X86_KERNELS)
  // Rows of interleaved 3-channel bytes (what image decoders give) into three planes with AVX2:
  // eight pixels a step, each channel's eight bytes gathered from 24 by two byte shuffles, then
  // the arithmetic of the plain loop in its order (the same bits). `means[c]` is the mean image's
  // first row of the crop for channel c (`mean_stride` apart), or the channel's mean. Nothing is
  // read past a row's last pixel.
  template <bool PerPixelMean, bool Mirror, bool Stream>
  [[gnu::target("avx2")]] static void interleaved3_avx2(
      const std::uint8_t* from, std::size_t from_stride, const std::array<const float*, 3>& means,
      std::size_t mean_stride, const std::array<float*, 3>& planes, std::size_t width,
      std::size_t height, float scale) noexcept {
    const detail::rgb_split split;
    const __m256 scales = _mm256_set1_ps(scale);
    const __m256i reversed = _mm256_setr_epi32(7, 6, 5, 4, 3, 2, 1, 0);
    __m256 channel_means[3];
    for (std::size_t c = 0; c < 3; ++c) channel_means[c] = _mm256_set1_ps(*means[c]);
    // Stores go forward in both directions (a mirrored row reads its pixels from the right).
    for (std::size_t h = 0; h < height; ++h, from += from_stride) {
      std::size_t o = 0;  // output column
      for (; o + 8 <= width; o += 8) {
        const std::size_t w = Mirror ? width - o - 8 : o;  // the input's first of eight
        __m128i channels[3];
        split(from + 3 * w, channels);
        for (std::size_t c = 0; c < 3; ++c) {
          const __m128i bytes = channels[c];
          __m256 mean = channel_means[c];
          if constexpr (PerPixelMean) mean = _mm256_loadu_ps(means[c] + h * mean_stride + w);
          __m256 values = _mm256_mul_ps(
              _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes)), mean), scales);
          if constexpr (Mirror) values = _mm256_permutevar8x32_ps(values, reversed);
          store8<Stream>(planes[c] + h * width + o, values);
        }
      }
      for (; o < width; ++o) {
        const std::size_t w = Mirror ? width - 1 - o : o;
        for (std::size_t c = 0; c < 3; ++c) {
          const float mean = PerPixelMean ? means[c][h * mean_stride + w] : *means[c];
          planes[c][h * width + o] = (static_cast<float>(from[3 * w + c]) - mean) * scale;
        }
      }
    }
  }
#endif

  float mean_of_channel(std::size_t c) const noexcept {
    if (options_.mean_values.empty()) return 0.0f;
    return options_.mean_values.size() == 1 ? options_.mean_values[0] : options_.mean_values[c];
  }

  void check_output(const record_shape& input, std::span<const float> out) const {
    check_output_size(input, out.size());
  }
  void check_output_size(const record_shape& input, std::size_t size) const {
    const record_shape shape = output_shape(input.channels, input.height, input.width);
    if (size != shape.elements()) {
      detail::fail<length_error>("caffe_transform: {} x {} x {} values out, but room for {}",
                                 shape.channels, shape.height, shape.width, size);
    }
  }

  caffe_transform_options options_;
  record_shape mean_shape_;
};

}  // namespace crema
