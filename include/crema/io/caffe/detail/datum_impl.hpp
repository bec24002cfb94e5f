#pragma once

#include <crema/core/detail/checked.hpp>
#include <crema/core/detail/library_inline.hpp>
#include <crema/core/error.hpp>
#include <crema/io/caffe/datum.hpp>
#include <crema/io/detail/protobuf_wire.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

// The Datum's wire format, read and written: compiled once in libcrema (src/core/), or included
// by datum.hpp, inline, where the core's code is in its headers (library_inline.hpp).

namespace crema {

CREMA_CORE_INLINE datum_view decode_datum(std::span<const std::byte> bytes, std::string_view key) {
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

CREMA_CORE_INLINE void datum_view::copy_floats(std::span<float> out) const {
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

CREMA_CORE_INLINE void encode_datum(const datum_fields& fields, std::vector<std::byte>& out) {
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

}  // namespace crema
