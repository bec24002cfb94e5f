#pragma once

#include <crema/core/detail/checked.hpp>
#include <crema/core/error.hpp>
#include <crema/io/detail/protobuf_wire.hpp>
#include <crema/io/encoded_sample.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
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

// ---------------------------------------------------------------------------------------------

inline datum_view decode_datum(std::span<const std::byte> bytes, std::string_view key) {
  detail::wire_reader reader(bytes, "datum", key);
  datum_view datum;
  datum.message = bytes;
  while (!reader.done()) {
    const auto tag = reader.next_tag();
    const auto expect = [&](detail::wire_type type, const char* name) {
      if (tag.type != type) reader.wrong_type(tag, name);
    };
    switch (tag.field) {
      case 1:
        expect(detail::wire_type::varint, "channels");
        datum.channels = reader.int32(1, "channels");
        break;
      case 2:
        expect(detail::wire_type::varint, "height");
        datum.height = reader.int32(2, "height");
        break;
      case 3:
        expect(detail::wire_type::varint, "width");
        datum.width = reader.int32(3, "width");
        break;
      case 4:
        expect(detail::wire_type::length_delimited, "data");
        datum.data = reader.bytes(4, "data");  // the last occurrence wins, as in protobuf
        break;
      case 5:
        expect(detail::wire_type::varint, "label");
        datum.label = reader.int32(5, "label");
        break;
      case 6:
        datum.float_count += reader.fixed_values<float>(tag, "float_data").size() / sizeof(float);
        break;
      case 7:
        expect(detail::wire_type::varint, "encoded");
        datum.encoded = reader.varint(7, "encoded") != 0;
        break;
      default:
        reader.skip(tag);
    }
  }
  if (datum.channels < 0 || datum.height < 0 || datum.width < 0) {
    detail::fail<format_error>("{}: negative shape {} x {} x {}", reader.subject(), datum.channels,
                               datum.height, datum.width);
  }
  const auto per_channel = detail::checked_mul(static_cast<std::size_t>(datum.height),
                                               static_cast<std::size_t>(datum.width));
  const auto elements =
      per_channel ? detail::checked_mul(*per_channel, static_cast<std::size_t>(datum.channels))
                  : std::nullopt;
  if (!elements) {
    detail::fail<format_error>("{}: shape {} x {} x {} overflows", reader.subject(), datum.channels,
                               datum.height, datum.width);
  }
  // The values a raw record holds, as Caffe's DataTransformer takes them: its pixels when it has
  // any, else its floats; all of them (none at all is as wrong as too few: a reader would read
  // past them).
  if (!datum.encoded && (!datum.data.empty() || datum.float_count == 0) &&
      datum.data.size() != *elements) {
    detail::fail<format_error>(
        "{}: field 4 (data) holds {} bytes, but channels x height x width is {} x {} x {} = {}",
        reader.subject(), datum.data.size(), datum.channels, datum.height, datum.width, *elements);
  }
  if (!datum.encoded && datum.data.empty() && datum.float_count != 0 &&
      datum.float_count != *elements) {
    detail::fail<format_error>(
        "{}: field 6 (float_data) holds {} values, but channels x height x width is {} x {} x {} "
        "= {}",
        reader.subject(), datum.float_count, datum.channels, datum.height, datum.width, *elements);
  }
  return datum;
}

inline void datum_view::copy_floats(std::span<float> out) const {
  if (out.size() != float_count) {
    detail::fail<length_error>("datum: {} floats to copy into room for {}", float_count,
                               out.size());
  }
  detail::wire_reader reader(message, "datum");
  std::size_t next = 0;
  while (!reader.done()) {
    const auto tag = reader.next_tag();
    if (tag.field == 6) {
      const auto values = reader.fixed_values<float>(tag, "float_data");
      for (std::size_t i = 0; i < values.size() / sizeof(float); ++i) {
        out[next++] = detail::value_from_wire<float>(values, i);
      }
    } else {
      reader.skip(tag);
    }
  }
}

inline void encode_datum(const datum_fields& fields, std::vector<std::byte>& out) {
  detail::wire_writer writer(out);
  writer.int32_field(1, fields.channels);
  writer.int32_field(2, fields.height);
  writer.int32_field(3, fields.width);
  if (!fields.data.empty() || fields.float_data.empty()) writer.bytes_field(4, fields.data);
  writer.int32_field(5, fields.label);
  for (const float value : fields.float_data) writer.fixed32_field(6, value);
  if (fields.encoded) {
    writer.tag(7, detail::wire_type::varint);
    writer.varint(1);
  }
}

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
