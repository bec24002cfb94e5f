#pragma once

#include <crema/core/detail/library_inline.hpp>
#include <crema/core/error.hpp>
#include <crema/io/encoded_sample.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

/// @file
/// Caffe's `Datum` message (caffe.proto: channels = 1, height = 2, width = 3, data = 4 bytes,
/// label = 5, float_data = 6 repeated float, encoded = 7 bool), read from and written to the
/// protocol-buffer wire format without a protobuf library and without a message object: a
/// `datum_view` points into the record's own bytes.

namespace crema {

/// @brief A decoded `Datum`, pointing into the bytes it was decoded from (valid while they are).
struct datum_view {
  std::int32_t channels = 0;
  std::int32_t height = 0;
  std::int32_t width = 0;
  std::int32_t label = 0;
  bool encoded = false;  ///< `data` is an encoded image (JPEG, PNG), not raw pixels
  /// Raw pixels, channel-first (C x H x W bytes), or the encoded image's bytes.
  std::span<const std::byte> data;
  /// How many values `float_data` holds (for records of floats instead of bytes; a record with
  /// pixels too is read by its pixels, as Caffe reads it).
  std::size_t float_count = 0;

  /// @return channels x height x width
  [[nodiscard]] std::size_t elements() const noexcept {
    return static_cast<std::size_t>(channels) * static_cast<std::size_t>(height) *
           static_cast<std::size_t>(width);
  }
  /// @brief Copies the `float_data` values (packed or not on the wire) into `out`, which must
  /// hold `float_count` of them. Allocates nothing.
  void copy_floats(std::span<float> out) const;

  /// The whole serialized message (`copy_floats` reads float_data from it again).
  std::span<const std::byte> message;
};

/// @brief Decodes a serialized `Datum`. Every varint and length is checked; unknown fields are
/// skipped as protobuf skips them.
/// @param bytes the record's value
/// @param key   the record's key, for error messages
/// @throws crema::format_error naming the key and the field: truncated input, a varint over
///         10 bytes or 64 bits, a length past the end, an unknown or group wire type, a field of
///         the wrong wire type, negative dimensions, or a pixel or float count that disagrees
///         with channels x height x width
[[nodiscard]] datum_view decode_datum(std::span<const std::byte> bytes, std::string_view key = {});

/// @brief What `encode_datum` writes: the fields of a `Datum`.
struct datum_fields {
  std::int32_t channels = 0;
  std::int32_t height = 0;
  std::int32_t width = 0;
  std::int32_t label = 0;
  bool encoded = false;
  std::span<const std::byte> data = {};  ///< raw pixels (C x H x W) or the encoded image
  std::span<const float> float_data = {};
};

/// @brief Appends `fields` serialized as Caffe writes a `Datum` (fields in number order,
/// float_data unpacked, `encoded` only when true) to `out`, whose capacity is reused.
void encode_datum(const datum_fields& fields, std::vector<std::byte>& out);

/// @brief A record holding a serialized Datum and a key (`lmdb_record` is one).
template <class Record>
concept datum_record = requires(const Record& record) {
  { record.value } -> std::convertible_to<std::span<const std::byte>>;
  { record.key_text() } -> std::convertible_to<std::string_view>;
};

/// @brief The encoded image a record's Datum holds (what `convert_imageset --encoded` stores),
/// for the batchers that decode images.
/// @throws crema::format_error naming the record's key for a corrupt Datum, or for one of raw
///         pixels or floats (a `caffe_batcher` reads those)
template <datum_record Record>
[[nodiscard]] encoded_sample encoded_datum(const Record& record) {
  const std::string_view key = record.key_text();
  const datum_view datum = decode_datum(record.value, key);
  if (!datum.encoded) {
    detail::fail<format_error>(
        "record {}: raw pixels, not an encoded image (a caffe_batcher reads raw Datums)", key);
  }
  return {datum.data, datum.label, key};
}

}  // namespace crema

#if CREMA_CORE_IN_HEADERS
#include <crema/io/caffe/detail/datum_impl.hpp>
#endif
