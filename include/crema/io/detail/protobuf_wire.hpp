#pragma once

#include <crema/core/error.hpp>

#include <algorithm>
#include <bit>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace crema::detail {

// The protocol-buffer wire format, as far as Caffe's messages need it: a reader over a byte span
// that checks every varint and length against the bytes there are, and a writer. Errors are
// crema::format_error naming the message, the record key and the field.

enum class wire_type : std::uint8_t {
  varint = 0,
  fixed64 = 1,
  length_delimited = 2,
  start_group = 3,
  end_group = 4,
  fixed32 = 5,
};

class wire_reader {
 public:
  // `kind` and `key` name the message and the record in errors ("datum 00000042_cat/img.jpg");
  // the name is only put together when there is an error to report.
  wire_reader(std::span<const std::byte> bytes, std::string_view kind,
              std::string_view key = {}) noexcept
      : bytes_(bytes), kind_(kind), key_(key) {}

  [[nodiscard]] bool done() const noexcept { return at_ == bytes_.size(); }
  [[nodiscard]] std::size_t offset() const noexcept { return at_; }

  // The next field's number and wire type.
  struct tag {
    std::uint32_t field;
    wire_type type;
  };
  tag next_tag() {
    const std::uint64_t key = varint(0, "tag");
    const auto type = static_cast<std::uint8_t>(key & 7);
    const std::uint64_t field = key >> 3;
    if (field == 0 || field > 0x1fffffff) {
      fail<format_error>("{}: field number {} at byte {} is not valid", subject(), field, at_);
    }
    if (type > 5) {
      fail<format_error>("{}: field {} has the unknown wire type {} at byte {}", subject(), field,
                         type, at_);
    }
    return {static_cast<std::uint32_t>(field), static_cast<wire_type>(type)};
  }

  // A varint of at most 10 bytes; `field` names it in errors.
  std::uint64_t varint(std::uint32_t field, const char* name) {
    std::uint64_t value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (at_ >= bytes_.size()) {
        fail<format_error>("{}: field {} ({}) is truncated: its varint runs past the {} bytes",
                           subject(), field, name, bytes_.size());
      }
      const auto byte = static_cast<std::uint8_t>(bytes_[at_++]);
      if (shift == 63 && byte > 1) {
        fail<format_error>("{}: field {} ({}) has a varint longer than 64 bits", subject(), field,
                           name);
      }
      value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return value;
    }
    fail<format_error>("{}: field {} ({}) has a varint of more than 10 bytes", subject(), field,
                       name);
  }

  // An int32 field (negative values are 10-byte varints).
  std::int32_t int32(std::uint32_t field, const char* name) {
    const auto value = static_cast<std::int64_t>(varint(field, name));
    if (value < INT32_MIN || value > INT32_MAX) {
      fail<format_error>("{}: field {} ({}) holds {}, which is not an int32", subject(), field,
                         name, value);
    }
    return static_cast<std::int32_t>(value);
  }

  // The bytes of a length-delimited field.
  std::span<const std::byte> bytes(std::uint32_t field, const char* name) {
    const std::uint64_t length = varint(field, name);
    if (length > bytes_.size() - at_) {
      fail<format_error>("{}: field {} ({}) says {} bytes, only {} are left", subject(), field,
                         name, length, bytes_.size() - at_);
    }
    const auto part = bytes_.subspan(at_, static_cast<std::size_t>(length));
    at_ += static_cast<std::size_t>(length);
    return part;
  }

  // A fixed 4-byte value (a float's bits, little-endian on the wire).
  std::span<const std::byte> fixed32(std::uint32_t field, const char* name) {
    return fixed(4, field, name);
  }
  std::span<const std::byte> fixed64(std::uint32_t field, const char* name) {
    return fixed(8, field, name);
  }

  // The little-endian values of one occurrence of a repeated float (T = float, fixed32) or double
  // (fixed64) field, unpacked (one value) or packed (any number of them, whole ones checked).
  template <class T>
  std::span<const std::byte> fixed_values(tag t, const char* name) {
    static_assert(sizeof(T) == 4 || sizeof(T) == 8);
    constexpr wire_type single = sizeof(T) == 4 ? wire_type::fixed32 : wire_type::fixed64;
    if (t.type == single) return fixed(sizeof(T), t.field, name);
    if (t.type != wire_type::length_delimited) wrong_type(t, name);
    const auto packed = bytes(t.field, name);
    if (packed.size() % sizeof(T) != 0) {
      fail<format_error>("{}: field {} ({}) holds {} bytes, not whole {}", subject(), t.field, name,
                         packed.size(), sizeof(T) == 4 ? "floats" : "doubles");
    }
    return packed;
  }

  // Skips a field this reader does not know, as protobuf does.
  void skip(tag t) {
    switch (t.type) {
      case wire_type::varint:
        (void)varint(t.field, "unknown");
        return;
      case wire_type::fixed64:
        (void)fixed64(t.field, "unknown");
        return;
      case wire_type::length_delimited:
        (void)bytes(t.field, "unknown");
        return;
      case wire_type::fixed32:
        (void)fixed32(t.field, "unknown");
        return;
      case wire_type::start_group:
      case wire_type::end_group:
        break;
    }
    fail<format_error>("{}: field {} uses groups (wire type {}), which no Caffe message has",
                       subject(), t.field, static_cast<int>(t.type));
  }

  // Says `field` came with the wrong wire type.
  [[noreturn]] void wrong_type(tag t, const char* name) const {
    fail<format_error>("{}: field {} ({}) has wire type {}, which it cannot have", subject(),
                       t.field, name, static_cast<int>(t.type));
  }

  // What errors name: "datum 00000042_cat/img.jpg", or "datum" for a record without a key.
  [[nodiscard]] std::string subject() const {
    return key_.empty() ? std::string(kind_) : crema::detail::format("{} {}", kind_, key_);
  }

 private:
  std::span<const std::byte> fixed(std::size_t size, std::uint32_t field, const char* name) {
    if (size > bytes_.size() - at_) {
      fail<format_error>("{}: field {} ({}) is truncated: {} bytes needed, {} left", subject(),
                         field, name, size, bytes_.size() - at_);
    }
    const auto part = bytes_.subspan(at_, size);
    at_ += size;
    return part;
  }

  std::span<const std::byte> bytes_;
  std::string_view kind_;
  std::string_view key_;
  std::size_t at_ = 0;
};

// Appends the wire format to a byte vector (whose capacity is reused: no allocation once grown).
class wire_writer {
 public:
  explicit wire_writer(std::vector<std::byte>& out) noexcept : out_(&out) {}

  void varint(std::uint64_t value) {
    while (value >= 0x80) {
      out_->push_back(static_cast<std::byte>((value & 0x7f) | 0x80));
      value >>= 7;
    }
    out_->push_back(static_cast<std::byte>(value));
  }
  void tag(std::uint32_t field, wire_type type) {
    varint((static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint8_t>(type));
  }
  void int32_field(std::uint32_t field, std::int32_t value) {
    tag(field, wire_type::varint);
    varint(static_cast<std::uint64_t>(static_cast<std::int64_t>(value)));  // sign-extended
  }
  void bytes_field(std::uint32_t field, std::span<const std::byte> bytes) {
    tag(field, wire_type::length_delimited);
    varint(bytes.size());
    out_->insert(out_->end(), bytes.begin(), bytes.end());
  }
  void fixed32_field(std::uint32_t field, float value) {
    tag(field, wire_type::fixed32);
    append_little_endian(value);
  }
  template <class T>
  void append_little_endian(T value) {
    std::byte raw[sizeof(T)];
    std::memcpy(raw, &value, sizeof(T));
    if constexpr (std::endian::native == std::endian::big) std::reverse(raw, raw + sizeof(T));
    out_->insert(out_->end(), raw, raw + sizeof(T));
  }

 private:
  std::vector<std::byte>* out_;
};

// Value `i` of little-endian floats or doubles from the wire (`fixed_values`).
template <class T>
[[nodiscard]] T value_from_wire(std::span<const std::byte> values, std::size_t i) noexcept {
  std::byte raw[sizeof(T)];
  std::memcpy(raw, values.data() + i * sizeof(T), sizeof(T));
  if constexpr (std::endian::native == std::endian::big) std::reverse(raw, raw + sizeof(T));
  T value;
  std::memcpy(&value, raw, sizeof(T));
  return value;
}

}  // namespace crema::detail
