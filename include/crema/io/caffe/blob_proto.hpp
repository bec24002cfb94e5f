#pragma once

#include <crema/core/detail/checked.hpp>
#include <crema/core/error.hpp>
#include <crema/io/detail/protobuf_wire.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

/// @file
/// Caffe's `BlobProto` (caffe.proto: num = 1, channels = 2, height = 3, width = 4, data = 5
/// packed float, diff = 6, shape = 7 (BlobShape: dim = 1 packed int64), double_data = 8,
/// double_diff = 9): what `compute_image_mean` writes as a mean file.

namespace crema {

/// @brief A decoded blob: its shape and its values as floats (double data converted).
struct blob {
  std::vector<std::int64_t> shape;  ///< BlobShape's dims, or num, channels, height, width
  std::vector<float> data;

  /// @return the product of the shape
  [[nodiscard]] std::size_t count() const noexcept {
    std::size_t product = 1;
    for (const auto dim : shape) product *= static_cast<std::size_t>(dim);
    return shape.empty() ? 0 : product;
  }
};

/// @brief Decodes a serialized `BlobProto`. Every varint and length is checked; unknown fields
/// are skipped.
/// @param what names the blob in errors (a path)
/// @throws crema::format_error naming it and the field: malformed wire format, negative or
///         overflowing dimensions, or a value count that disagrees with the shape
[[nodiscard]] blob decode_blob_proto(std::span<const std::byte> bytes, std::string_view what);

/// @brief Reads and decodes a mean file (`.binaryproto`).
/// @throws crema::config_error naming the path if it cannot be read; crema::format_error as
///         `decode_blob_proto`
[[nodiscard]] blob read_blob_proto(const std::filesystem::path& path);

/// @brief Appends `values` of `shape` serialized as a `BlobProto` (shape and packed data), as
/// Caffe's tools write mean files.
void encode_blob_proto(std::span<const std::int64_t> shape, std::span<const float> values,
                       std::vector<std::byte>& out);

// ---------------------------------------------------------------------------------------------

inline blob decode_blob_proto(std::span<const std::byte> bytes, std::string_view what) {
  detail::wire_reader reader(bytes, "blob", what);
  blob result;
  std::int64_t legacy[4] = {0, 0, 0, 0};  // num, channels, height, width
  bool has_legacy = false;
  bool has_shape = false;
  // float data (field 5) and double data (field 8) alike, as floats.
  const auto read_values = [&]<class T>(detail::wire_reader::tag tag, const char* field, T) {
    const auto values = reader.fixed_values<T>(tag, field);
    for (std::size_t i = 0; i < values.size() / sizeof(T); ++i) {
      result.data.push_back(static_cast<float>(detail::value_from_wire<T>(values, i)));
    }
  };
  while (!reader.done()) {
    const auto tag = reader.next_tag();
    switch (tag.field) {
      case 1:
      case 2:
      case 3:
      case 4: {
        static constexpr const char* names[] = {"num", "channels", "height", "width"};
        if (tag.type != detail::wire_type::varint) reader.wrong_type(tag, names[tag.field - 1]);
        legacy[tag.field - 1] = reader.int32(tag.field, names[tag.field - 1]);
        has_legacy = true;
        break;
      }
      case 5:
        read_values(tag, "data", float{});
        break;
      case 7: {
        if (tag.type != detail::wire_type::length_delimited) reader.wrong_type(tag, "shape");
        detail::wire_reader shape(reader.bytes(7, "shape"), "blob", what);
        result.shape.clear();
        while (!shape.done()) {
          const auto dim = shape.next_tag();
          if (dim.field == 1 && dim.type == detail::wire_type::varint) {
            result.shape.push_back(static_cast<std::int64_t>(shape.varint(1, "shape.dim")));
          } else if (dim.field == 1 && dim.type == detail::wire_type::length_delimited) {
            detail::wire_reader dims(shape.bytes(1, "shape.dim"), "blob", what);
            while (!dims.done()) {
              result.shape.push_back(static_cast<std::int64_t>(dims.varint(1, "shape.dim")));
            }
          } else {
            shape.skip(dim);
          }
        }
        has_shape = true;
        break;
      }
      case 8:
        read_values(tag, "double_data", double{});
        break;
      default:
        reader.skip(tag);  // diff, double_diff and fields this reader does not know
    }
  }
  if (!has_shape && has_legacy) result.shape.assign(legacy, legacy + 4);
  std::optional<std::size_t> count =
      result.shape.empty() ? std::optional<std::size_t>(0) : std::optional<std::size_t>(1);
  for (const auto dim : result.shape) {
    if (dim < 0) detail::fail<format_error>("{}: negative dimension {}", reader.subject(), dim);
    count = count ? detail::checked_mul(*count, static_cast<std::size_t>(dim)) : std::nullopt;
  }
  if (!count) detail::fail<format_error>("{}: its shape overflows", reader.subject());
  if (result.data.size() != *count) {
    detail::fail<format_error>("{}: holds {} values, but its shape has {}", reader.subject(),
                               result.data.size(), *count);
  }
  return result;
}

inline blob read_blob_proto(const std::filesystem::path& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) detail::fail<config_error>("mean file {}: cannot be opened", path.string());
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return decode_blob_proto(std::as_bytes(std::span<const char>(bytes)), path.string());
}

inline void encode_blob_proto(std::span<const std::int64_t> shape, std::span<const float> values,
                              std::vector<std::byte>& out) {
  detail::wire_writer writer(out);
  std::vector<std::byte> dims;
  detail::wire_writer dim_writer(dims);
  for (const auto dim : shape) dim_writer.varint(static_cast<std::uint64_t>(dim));
  std::vector<std::byte> shape_message;
  detail::wire_writer shape_writer(shape_message);
  shape_writer.bytes_field(1, dims);
  writer.bytes_field(7, shape_message);
  std::vector<std::byte> packed;
  detail::wire_writer packed_writer(packed);
  for (const float value : values) packed_writer.append_little_endian(value);
  writer.bytes_field(5, packed);
}

}  // namespace crema
