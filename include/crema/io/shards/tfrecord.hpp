#pragma once

#include <crema/core/error.hpp>
#include <crema/io/detail/protobuf_wire.hpp>
#include <crema/io/shards/crc32c.hpp>

#include <array>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

/// @file
/// TFRecord files as TensorFlow writes them: each record its length (8 bytes, little-endian),
/// the masked CRC-32C of those 8 bytes, its data, and the masked CRC-32C of the data. A reader of
/// the framing (`tfrecord_scanner`, which checks every length's CRC and reads no data), the data
/// check, and a writer; and `tf_example`, the `tf.train.Example` a record of an image data set
/// holds, decoded by crema's protocol-buffer reader. Component: core.

namespace crema {

/// @brief Where one record's data lies in its file.
struct tfrecord_location {
  std::uint64_t offset = 0;  ///< of its data's first byte (its header starts 12 bytes before)
  std::uint64_t size = 0;
  /// Whether its header (the length and its CRC) was read and found to agree: so where a
  /// scanner found the record; not where an index file placed it, and reading it checks then.
  bool header_checked = true;
};

namespace detail {

inline constexpr std::size_t tfrecord_header = 12;  // length, and its CRC
inline constexpr std::size_t tfrecord_footer = 4;   // the data's CRC

[[nodiscard]] inline std::uint32_t load_le32(const std::byte* at) noexcept {
  std::uint32_t value = 0;
  std::memcpy(&value, at, 4);
  return std::endian::native == std::endian::little ? value : __builtin_bswap32(value);
}
[[nodiscard]] inline std::uint64_t load_le64(const std::byte* at) noexcept {
  std::uint64_t value = 0;
  std::memcpy(&value, at, 8);
  return std::endian::native == std::endian::little ? value : __builtin_bswap64(value);
}

// The length the record header at byte `at` of `shard` holds, or nothing where its CRC fails.
template <class Shard>
[[nodiscard]] std::optional<std::uint64_t> read_tfrecord_length(const Shard& shard,
                                                                std::uint64_t at) {
  std::array<std::byte, tfrecord_header> header{};
  shard.read_at(at, header);
  if (masked_crc32c(std::span(header).first(8)) != load_le32(header.data() + 8)) {
    return std::nullopt;
  }
  return load_le64(header.data());
}

}  // namespace detail

/// @brief Reads a TFRecord file's record headers one after another: each length and its CRC,
/// no data. A length whose CRC fails, a record that runs past the file's end and a file that
/// ends inside a header are `crema::format_error`s naming the shard and the byte offset of the
/// record's header.
/// @tparam Shard has `read_at(offset, span<byte>)`, `size()` and `path()` (`shard_file`)
template <class Shard>
class tfrecord_scanner {
 public:
  explicit tfrecord_scanner(const Shard& shard) noexcept : shard_(&shard) {}

  /// @return the next record's place, or nothing at the file's end
  [[nodiscard]] std::optional<tfrecord_location> next() {
    if (at_ == shard_->size()) return std::nullopt;
    if (shard_->size() - at_ < detail::tfrecord_header) fail("ends inside a record's header");
    const std::optional<std::uint64_t> read = detail::read_tfrecord_length(*shard_, at_);
    if (!read) fail("has a record whose length's CRC fails");
    const std::uint64_t length = *read;
    const std::uint64_t data = at_ + detail::tfrecord_header;
    if (length > shard_->size() - data ||
        shard_->size() - data - length < detail::tfrecord_footer) {
      fail(detail::format("has a record of {} bytes that runs past its end", length));
    }
    at_ = data + length + detail::tfrecord_footer;
    return tfrecord_location{data, length};
  }

 private:
  [[noreturn]] void fail(std::string_view what) const {
    detail::fail<format_error>("tfrecord shard {}: {} at byte {}", shard_->path(), what, at_);
  }

  const Shard* shard_;
  std::uint64_t at_ = 0;
};

/// @brief Reads one record's data into `into` (resized to it) and checks its CRC.
/// @throws crema::format_error naming the shard and the record's offset if the CRC fails;
///         crema::io_error if the read does
template <class Shard>
void read_tfrecord(const Shard& shard, const tfrecord_location& record,
                   std::vector<std::byte>& into) {
  if (!record.header_checked) {
    // Placed by an index: the header is read with the data, and must frame it.
    const std::uint64_t at = record.offset - detail::tfrecord_header;
    const std::optional<std::uint64_t> length = detail::read_tfrecord_length(shard, at);
    if (length != record.size) {
      detail::fail<format_error>(
          "tfrecord shard {}: no record of {} bytes at byte {}, where its index places one (the "
          "header there {})",
          shard.path(), record.size, at,
          length ? detail::format("says {} bytes", *length) : std::string("fails its CRC"));
    }
  }
  into.resize(static_cast<std::size_t>(record.size) + detail::tfrecord_footer);
  shard.read_at(record.offset, into);
  const std::uint32_t stored = detail::load_le32(into.data() + record.size);
  into.resize(static_cast<std::size_t>(record.size));
  if (detail::masked_crc32c(into) != stored) {
    detail::fail<format_error>("tfrecord shard {}: the record at byte {} fails its data's CRC",
                               shard.path(), record.offset - detail::tfrecord_header);
  }
}

/// @brief Writes a TFRecord file, framed as TensorFlow frames it.
class tfrecord_writer {
 public:
  /// @throws crema::io_error naming the path if it cannot be made
  explicit tfrecord_writer(std::string path) : path_(std::move(path)) {
    out_.open(path_, std::ios::binary | std::ios::trunc);
    if (!out_) detail::fail_with_code<io_error>(errno, "tfrecord_writer: cannot make {}", path_);
  }

  /// @brief Appends one record.
  /// @throws crema::io_error if the write fails
  void write(std::span<const std::byte> data) {
    std::array<std::byte, detail::tfrecord_header> header{};
    const std::uint64_t length = std::endian::native == std::endian::little
                                     ? std::uint64_t{data.size()}
                                     : __builtin_bswap64(std::uint64_t{data.size()});
    std::memcpy(header.data(), &length, 8);
    put_le32(header.data() + 8, detail::masked_crc32c(std::span(header).first(8)));
    std::array<std::byte, detail::tfrecord_footer> footer{};
    put_le32(footer.data(), detail::masked_crc32c(data));
    out_.write(reinterpret_cast<const char*>(header.data()), header.size());
    out_.write(reinterpret_cast<const char*>(data.data()),
               static_cast<std::streamsize>(data.size()));
    out_.write(reinterpret_cast<const char*>(footer.data()), footer.size());
    if (!out_) detail::fail_with_code<io_error>(0, "tfrecord_writer: cannot write {}", path_);
    bytes_ += header.size() + data.size() + footer.size();
  }
  /// @brief Closes the file. The destructor closes it too, without reporting a failure.
  void finish() {
    if (!out_.is_open()) return;
    out_.close();
    if (!out_) detail::fail_with_code<io_error>(0, "tfrecord_writer: cannot write {}", path_);
  }
  /// @return the bytes written so far
  [[nodiscard]] std::uint64_t bytes() const noexcept { return bytes_; }

 private:
  static void put_le32(std::byte* at, std::uint32_t value) noexcept {
    if constexpr (std::endian::native == std::endian::big) value = __builtin_bswap32(value);
    std::memcpy(at, &value, 4);
  }

  std::string path_;
  std::ofstream out_;
  std::uint64_t bytes_ = 0;
};

/// @brief Which list a `tf.train.Feature` holds.
enum class tf_feature_kind { bytes, floats, int64s };

/// @brief A `tf.train.Example` decoded in place: its features by name, each a list of byte
/// strings, floats or int64s, viewing the record's bytes (valid while they are).
///
/// Whatever bytes it is given, it either decodes them or raises a `crema::format_error` naming
/// `name` (the record) and what is wrong; a list is decoded when it is asked for.
class tf_example {
 public:
  /// @brief One feature: its name and its list's encoded bytes.
  struct feature {
    std::string_view name;
    tf_feature_kind kind = tf_feature_kind::bytes;
    std::span<const std::byte> list;  // a BytesList, FloatList or Int64List message
  };

  /// @throws crema::format_error naming `name` if `bytes` are not an Example
  tf_example(std::span<const std::byte> bytes, std::string_view name) : name_(name) {
    detail::wire_reader example(bytes, "tf.train.Example", name_);
    while (!example.done()) {
      const auto tag = example.next_tag();
      if (tag.field != 1) {
        example.skip(tag);
        continue;
      }
      if (tag.type != detail::wire_type::length_delimited) example.wrong_type(tag, "features");
      detail::wire_reader features(example.bytes(1, "features"), "tf.train.Features", name_);
      while (!features.done()) {
        const auto entry_tag = features.next_tag();
        if (entry_tag.field != 1) {
          features.skip(entry_tag);
          continue;
        }
        if (entry_tag.type != detail::wire_type::length_delimited) {
          features.wrong_type(entry_tag, "feature");
        }
        add(features.bytes(1, "feature"));
      }
    }
  }

  /// @return every feature, in the order they came (a name given twice: the last one counts)
  [[nodiscard]] const std::vector<feature>& features() const noexcept { return features_; }
  /// @return the feature `name`, or null
  [[nodiscard]] const feature* find(std::string_view name) const noexcept {
    for (auto it = features_.rbegin(); it != features_.rend(); ++it) {
      if (it->name == name) return &*it;
    }
    return nullptr;
  }

  /// @return the byte strings of feature `name`
  /// @throws crema::format_error naming the record and the feature if it is missing, holds
  ///         another kind of list, or does not decode
  [[nodiscard]] std::vector<std::span<const std::byte>> bytes(std::string_view name) const {
    std::vector<std::span<const std::byte>> values;
    detail::wire_reader list(of(name, tf_feature_kind::bytes), "tf.train.BytesList", name_);
    while (!list.done()) {
      const auto tag = list.next_tag();
      if (tag.field != 1) {
        list.skip(tag);
        continue;
      }
      if (tag.type != detail::wire_type::length_delimited) list.wrong_type(tag, "value");
      values.push_back(list.bytes(1, "value"));
    }
    return values;
  }
  /// @return the int64s of feature `name` (packed or not)
  /// @throws crema::format_error as `bytes`
  [[nodiscard]] std::vector<std::int64_t> int64s(std::string_view name) const {
    std::vector<std::int64_t> values;
    detail::wire_reader list(of(name, tf_feature_kind::int64s), "tf.train.Int64List", name_);
    while (!list.done()) {
      const auto tag = list.next_tag();
      if (tag.field != 1) {
        list.skip(tag);
      } else if (tag.type == detail::wire_type::varint) {
        values.push_back(static_cast<std::int64_t>(list.varint(1, "value")));
      } else if (tag.type == detail::wire_type::length_delimited) {
        detail::wire_reader packed(list.bytes(1, "value"), "tf.train.Int64List", name_);
        while (!packed.done()) {
          values.push_back(static_cast<std::int64_t>(packed.varint(1, "value")));
        }
      } else {
        list.wrong_type(tag, "value");
      }
    }
    return values;
  }
  /// @return the floats of feature `name` (packed or not)
  /// @throws crema::format_error as `bytes`
  [[nodiscard]] std::vector<float> floats(std::string_view name) const {
    std::vector<float> values;
    detail::wire_reader list(of(name, tf_feature_kind::floats), "tf.train.FloatList", name_);
    while (!list.done()) {
      const auto tag = list.next_tag();
      if (tag.field != 1) {
        list.skip(tag);
        continue;
      }
      const auto raw = list.fixed_values<float>(tag, "value");
      for (std::size_t i = 0; i < raw.size() / 4; ++i) {
        values.push_back(detail::value_from_wire<float>(raw, i));
      }
    }
    return values;
  }

 private:
  // One map entry: the key (field 1) and the Feature (field 2), whose one list says its kind.
  void add(std::span<const std::byte> entry_bytes) {
    detail::wire_reader entry(entry_bytes, "tf.train.Features entry", name_);
    feature found;
    bool named = false;
    while (!entry.done()) {
      const auto tag = entry.next_tag();
      if (tag.field == 1 && tag.type == detail::wire_type::length_delimited) {
        const auto key = entry.bytes(1, "key");
        found.name = {reinterpret_cast<const char*>(key.data()), key.size()};
        named = true;
      } else if (tag.field == 2 && tag.type == detail::wire_type::length_delimited) {
        detail::wire_reader value(entry.bytes(2, "value"), "tf.train.Feature", name_);
        while (!value.done()) {
          const auto kind = value.next_tag();
          if (kind.field < 1 || kind.field > 3) {
            value.skip(kind);
            continue;
          }
          if (kind.type != detail::wire_type::length_delimited) value.wrong_type(kind, "list");
          found.kind = kind.field == 1   ? tf_feature_kind::bytes
                       : kind.field == 2 ? tf_feature_kind::floats
                                         : tf_feature_kind::int64s;
          found.list = value.bytes(kind.field, "list");
        }
      } else if (tag.field == 1 || tag.field == 2) {
        entry.wrong_type(tag, tag.field == 1 ? "key" : "value");
      } else {
        entry.skip(tag);
      }
    }
    if (!named) {
      detail::fail<format_error>("tf.train.Example {}: a feature without a name", name_);
    }
    features_.push_back(found);
  }

  [[nodiscard]] std::span<const std::byte> of(std::string_view name, tf_feature_kind kind) const {
    const feature* found = find(name);
    if (found == nullptr) {
      std::string have;
      for (const feature& f : features_) have += (have.empty() ? "" : ", ") + std::string(f.name);
      detail::fail<format_error>("tf.train.Example {}: no feature '{}' (it has: {})", name_, name,
                                 have.empty() ? "none" : have);
    }
    if (found->kind != kind) {
      constexpr std::array<const char*, 3> kinds = {"bytes", "floats", "int64s"};
      detail::fail<format_error>("tf.train.Example {}: feature '{}' holds {}, not {}", name_, name,
                                 kinds[static_cast<std::size_t>(found->kind)],
                                 kinds[static_cast<std::size_t>(kind)]);
    }
    return found->list;
  }

  std::string_view name_;
  std::vector<feature> features_;
};

/// @brief Builds a `tf.train.Example`'s bytes, feature by feature (for writers and tests).
class tf_example_builder {
 public:
  tf_example_builder& add_bytes(std::string_view name, std::span<const std::byte> value) {
    std::vector<std::byte> list;
    detail::wire_writer(list).bytes_field(1, value);
    return add(name, 1, list);
  }
  tf_example_builder& add_int64(std::string_view name, std::int64_t value) {
    std::vector<std::byte> packed;
    detail::wire_writer(packed).varint(static_cast<std::uint64_t>(value));
    std::vector<std::byte> list;
    detail::wire_writer(list).bytes_field(1, packed);
    return add(name, 3, list);
  }
  tf_example_builder& add_floats(std::string_view name, std::span<const float> values) {
    std::vector<std::byte> packed;
    detail::wire_writer writer(packed);
    for (const float value : values) writer.append_little_endian(value);
    std::vector<std::byte> list;
    detail::wire_writer(list).bytes_field(1, packed);
    return add(name, 2, list);
  }
  /// @return the Example's bytes
  [[nodiscard]] std::vector<std::byte> bytes() const {
    std::vector<std::byte> example;
    detail::wire_writer(example).bytes_field(1, features_);
    return example;
  }

 private:
  tf_example_builder& add(std::string_view name, std::uint32_t kind,
                          std::span<const std::byte> list) {
    std::vector<std::byte> feature;
    detail::wire_writer(feature).bytes_field(kind, list);
    std::vector<std::byte> entry;
    detail::wire_writer entry_writer(entry);
    entry_writer.bytes_field(1, std::as_bytes(std::span(name.data(), name.size())));
    entry_writer.bytes_field(2, feature);
    detail::wire_writer(features_).bytes_field(1, entry);
    return *this;
  }

  std::vector<std::byte> features_;
};

}  // namespace crema
