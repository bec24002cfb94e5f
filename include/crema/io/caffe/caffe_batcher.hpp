#pragma once

#include <crema/core/batch_label.hpp>
#include <crema/core/error.hpp>
#include <crema/core/record_shape.hpp>
#include <crema/io/caffe/caffe_transform.hpp>
#include <crema/io/caffe/datum.hpp>
#include <crema/io/decode_plan.hpp>
#include <crema/io/image_view.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

/// @file
/// Caffe's data layer as a pipeline transform: a record's Datum is decoded (raw pixels, floats,
/// or an encoded image through an image decoder), transformed as Caffe's `DataTransformer` does
/// and written with its label into the batch, which the pipeline then uploads (`device_batch`).

namespace crema {

/// @brief The decoder of a batcher made for raw records only: an encoded record is an error
/// that says which component decodes it.
struct no_image_decoder {
  struct header {
    std::size_t channels = 0;
    std::size_t height = 0;
    std::size_t width = 0;
  };
  [[noreturn]] static header info(std::span<const std::byte>, std::string_view key) { refuse(key); }
  [[noreturn]] static image_view<std::uint8_t> decode(std::span<const std::byte>,
                                                      std::string_view key) {
    refuse(key);
  }

 private:
  [[noreturn]] static void refuse(std::string_view key) {
    detail::fail<format_error>(
        "record {}: an encoded image, and this batcher has no image decoder (give it a "
        "crema::image_decoder, from component crema::image)",
        key);
  }
};

namespace detail {

// What a window decoder is asked for in `window_decoder`: any plan, any sink of rows.
struct any_decode_plan {
  template <class Info>
  decode_plan operator()(const Info&) const noexcept {
    return {};
  }
};
struct any_window_sink {
  void start(const decoded_window&) noexcept {}
  void rows(const pixel_rows&) noexcept {}
};

}  // namespace detail

/// @brief A decoder that decodes only the window a plan names and hands the rows over in bands
/// (`crema::image_window_decoder`): a `caffe_batcher` given one decodes only each record's crop
/// and writes its rows while they are in the cache.
template <class Decoder>
concept window_decoder = requires(Decoder& decoder, std::span<const std::byte> bytes,
                                  std::string_view key, detail::any_window_sink& sink) {
  decoder.decode(bytes, key, detail::any_decode_plan{}, sink);
};

/// @brief The dimensions of the values a Datum holds: its channels, height and width, read from
/// the encoded image's header when it is encoded (what Caffe's data layer reads off the first
/// record to shape its batches).
/// @throws crema::format_error naming `key`, as `decode_datum` and the decoder do
template <class Decoder = no_image_decoder>
[[nodiscard]] record_shape datum_shape(std::span<const std::byte> value, std::string_view key,
                                       Decoder& decoder) {
  const datum_view datum = decode_datum(value, key);
  if (datum.encoded) {
    const auto info = decoder.info(datum.data, key);
    return {info.channels, info.height, info.width};
  }
  return {static_cast<std::size_t>(datum.channels), static_cast<std::size_t>(datum.height),
          static_cast<std::size_t>(datum.width)};
}

/// @brief A batch transform for the pipeline: record `i` of a batch gets the `caffe_transform`
/// of the record's Datum, and its label.
///
/// Every record must come out in the batch's shape (`shape()`, the transform of the input shape
/// given); one that does not is a `format_error` naming its key, as is a corrupt record. Random
/// choices come from the record's `sample_context::rng()`, so the same seed gives the same
/// batches whatever the producer and thread counts. Copied once per producer: each copy has its
/// own decoder and scratch, reused (no allocation per record once they have grown).
/// @tparam MakeBatch `Batch(const batch_context&, record_shape)`: makes one batch per slot
///         (a `device_batch` on the consumer's device, say), with `record(i)` (a span of floats,
///         or of `std::uint8_t`: the crop and mirror alone, 8-bit records only, their mean and
///         scale left to the device, `transform().normalization()`) and `set_label(i, label)`
/// @tparam Decoder   decodes encoded records: `crema::image_window_decoder` (only the crop is
///         decoded, and written row band by row band; order it BGR, as Caffe's images are), or
///         `crema::image_decoder` (the whole image, then the transform); `no_image_decoder`
///         refuses them. Both decoders give the same values.
template <class MakeBatch, class Decoder = no_image_decoder>
class caffe_batcher {
 public:
  using batch_type = std::invoke_result_t<const MakeBatch&, const batch_context&, record_shape>;
  /// What `record(i)` of a batch holds: float (the whole transform), or `std::uint8_t` (the crop
  /// and mirror; the mean and scale are `transform().normalization()`, for the device)
  using element_type =
      typename decltype(std::declval<batch_type&>().record(std::size_t{}))::element_type;
  static_assert(std::is_same_v<element_type, float> || std::is_same_v<element_type, std::uint8_t>,
                "crema: a caffe_batcher writes float or std::uint8_t records");
  /// What `set_label` takes: the batch's `label_type`, or its element type. A record whose label
  /// it cannot hold exactly is a `format_error` naming its key.
  using label_type = typename detail::batch_label_of<batch_type>::type;
  static_assert(
      !std::is_same_v<element_type, std::uint8_t> || sizeof(label_type) > 1,
      "crema: a batch of 8-bit pixels must keep its labels wider (device_batch and host_batch "
      "keep float)");

  /// @param input     the shape of the records' values (see `datum_shape`)
  /// @param transform crop, mirror, mean and scale
  /// @throws crema::config_error for a batch of bytes and a transform that cannot leave its mean
  ///         and scale to the device (`caffe_transform::check_byte_output`)
  caffe_batcher(record_shape input, caffe_transform transform, MakeBatch make,
                Decoder decoder = Decoder{})
      : transform_(std::move(transform)),
        shape_(transform_.output_shape(input.channels, input.height, input.width)),
        make_(std::move(make)),
        decoder_(std::move(decoder)) {
    if constexpr (std::is_same_v<element_type, std::uint8_t>) transform_.check_byte_output();
  }

  /// @return one record's shape in a batch
  [[nodiscard]] record_shape shape() const noexcept { return shape_; }

  [[nodiscard]] batch_type make_batch(const batch_context& where) const {
    return make_(where, shape_);
  }

  template <datum_record Record>
  void operator()(const Record& record, batch_type& batch, const sample_context& context) {
    const std::string_view key = record.key_text();
    const datum_view datum = decode_datum(record.value, key);
    const std::span<element_type> out = batch.record(context.index);
    sample_rng rng = context.rng();
    if (datum.encoded) {
      if constexpr (window_decoder<Decoder>) {
        put_window(datum.data, out, rng, key);
      } else {
        put(decoder_.decode(datum.data, key), out, rng, key);
      }
    } else if (datum.data.empty()) {  // pixels win over floats, as in Caffe
      if constexpr (std::is_same_v<element_type, std::uint8_t>) {
        detail::fail<format_error>(
            "record {}: float values, and the batch holds 8-bit pixels (make its batches of "
            "float)",
            key);
      }
      floats_.resize(datum.float_count);
      datum.copy_floats(floats_);
      put(image_view<float>::planar(floats_.data(), dim(datum.channels), dim(datum.height),
                                    dim(datum.width)),
          out, rng, key);
    } else {
      put(image_view<std::uint8_t>::planar(reinterpret_cast<const std::uint8_t*>(datum.data.data()),
                                           dim(datum.channels), dim(datum.height),
                                           dim(datum.width)),
          out, rng, key);
    }
    batch.set_label(context.index, detail::exact_label<label_type>(datum.label, key));
  }

  [[nodiscard]] const caffe_transform& transform() const noexcept { return transform_; }

 private:
  static std::size_t dim(std::int32_t value) noexcept { return static_cast<std::size_t>(value); }

  // The record's output shape must be the batch's.
  void check_shape(const record_shape& input, std::string_view key) const {
    const record_shape comes_out =
        transform_.output_shape(input.channels, input.height, input.width);
    if (comes_out != shape_) {
      detail::fail<format_error>(
          "record {}: {} x {} x {} comes out {} x {} x {}, but the batch holds {} x {} x {}", key,
          input.channels, input.height, input.width, comes_out.channels, comes_out.height,
          comes_out.width, shape_.channels, shape_.height, shape_.width);
    }
  }

  // The crop is drawn from the header's size before decoding; only its rows and columns are
  // decoded, and each band of rows is transformed as it comes, while in the cache.
  void put_window(std::span<const std::byte> bytes, std::span<element_type> out, sample_rng& rng,
                  std::string_view key) {
    if (out.size() != shape_.elements()) {
      detail::fail<length_error>("caffe_batcher: a record of {} values does not fit {} values",
                                 shape_.elements(), out.size());
    }
    record_shape input;
    caffe_crop crop;
    const auto plan_for = [&](const auto& info) {
      input = {info.channels, info.height, info.width};
      check_shape(input, key);
      transform_.check_input(input, key);
      crop = transform_.draw_crop(input, rng);
      return decode_plan{{crop.top, crop.left, shape_.height, shape_.width}};
    };
    struct band_sink {
      const caffe_transform& transform;
      const record_shape& input;
      const caffe_crop& crop;
      std::span<element_type> out;
      std::size_t width;
      std::string_view key;
      // The plan asks for the crop at full size: the decoder hands over exactly its columns.
      void start(const decoded_window& decoded) const {
        if (decoded.scale != 1 || decoded.width != width || decoded.box_left != 0) {
          detail::fail<format_error>(
              "record {}: the decoder handed over {} columns at 1/{}, not "
              "the crop's {}",
              key, decoded.width, decoded.scale, width);
        }
      }
      void rows(const pixel_rows& band) noexcept {
        const image_view<std::uint8_t> rows{band.data, input.channels, band.count,    width,
                                            1,         band.stride,    input.channels};
        transform.write_rows(rows, band.first, crop, input, out);
      }
    } sink{transform_, input, crop, out, shape_.width, key};
    decoder_.decode(bytes, key, plan_for, sink);
  }

  template <class T>
  void put(const image_view<T>& in, std::span<element_type> out, sample_rng& rng,
           std::string_view key) const {
    check_shape({in.channels, in.height, in.width}, key);
    if constexpr (std::is_same_v<element_type, float> || std::is_same_v<T, std::uint8_t>) {
      transform_(in, out, rng, key);
    }
  }

  caffe_transform transform_;
  record_shape shape_;
  MakeBatch make_;
  Decoder decoder_;
  std::vector<float> floats_;  // float_data, copied out of the wire
};

}  // namespace crema
