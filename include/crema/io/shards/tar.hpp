#pragma once

#include <crema/core/error.hpp>

#include <algorithm>
#include <array>
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
/// Tar archives as WebDataset shards are written: POSIX ustar headers, with GNU long names
/// (`././@LongLink`) and pax extended headers (`path`, `size`) read as GNU tar and Python's
/// tarfile write them. Only regular files are members; directories, links and the rest are
/// passed over. A reader of headers (`tar_scanner`, which reads no member's data) and a writer
/// (`tar_writer`, deterministic: the same members give the same bytes). Component: core.

namespace crema {

/// @brief One regular file of a tar archive: its name (long names resolved) and where its data
/// lies in the archive.
struct tar_member {
  std::string name;
  std::uint64_t offset = 0;  ///< of its first byte, from the archive's start
  std::uint64_t size = 0;
};

namespace detail {

inline constexpr std::size_t tar_block = 512;

// A numeric header field: octal digits (NUL- or space-padded), or GNU's base-256 (the first
// byte's high bit set) for values past the octal field's reach.
[[nodiscard]] inline std::optional<std::uint64_t> tar_number(std::span<const std::byte> field) {
  if (!field.empty() && (std::to_integer<unsigned>(field[0]) & 0x80U) != 0) {
    std::uint64_t value = std::to_integer<unsigned>(field[0]) & 0x7FU;
    for (std::size_t i = 1; i < field.size(); ++i) {
      if (value >> 56 != 0) return std::nullopt;
      value = (value << 8) | std::to_integer<unsigned>(field[i]);
    }
    return value;
  }
  std::uint64_t value = 0;
  std::size_t i = 0;
  while (i < field.size() && std::to_integer<char>(field[i]) == ' ') ++i;
  bool any = false;
  for (; i < field.size(); ++i) {
    const char c = std::to_integer<char>(field[i]);
    if (c == '\0' || c == ' ') break;
    if (c < '0' || c > '7' || value >> 60 != 0) return std::nullopt;
    value = value * 8 + static_cast<std::uint64_t>(c - '0');
    any = true;
  }
  return any ? std::optional(value) : std::optional<std::uint64_t>(0);
}

// A NUL-terminated (or field-long) text field.
[[nodiscard]] inline std::string tar_text(std::span<const std::byte> field) {
  const auto* chars = reinterpret_cast<const char*>(field.data());
  return {chars, strnlen(chars, field.size())};
}

// Whether the header's checksum field holds the sum of its bytes, the field itself counted as
// spaces (unsigned, as POSIX says, or signed, as some old writers summed).
[[nodiscard]] inline bool tar_checksum_holds(std::span<const std::byte, tar_block> header) {
  const auto stored = tar_number(header.subspan(148, 8));
  if (!stored) return false;
  std::uint64_t unsigned_sum = 0;
  std::int64_t signed_sum = 0;
  for (std::size_t i = 0; i < tar_block; ++i) {
    const bool in_field = i >= 148 && i < 156;
    const unsigned byte = in_field ? unsigned{' '} : std::to_integer<unsigned>(header[i]);
    unsigned_sum += byte;
    signed_sum += static_cast<signed char>(byte);
  }
  return *stored == unsigned_sum || static_cast<std::int64_t>(*stored) == signed_sum;
}

// A pax extended header's records, "LENGTH KEY=VALUE\n" each: the path and size it sets for the
// next member (other keys are passed over).
struct pax_overrides {
  std::optional<std::string> path;
  std::optional<std::uint64_t> size;
};

[[nodiscard]] inline std::optional<pax_overrides> parse_pax(std::string_view records) {
  pax_overrides found;
  while (!records.empty()) {
    const std::size_t space = records.find(' ');
    if (space == std::string_view::npos || space == 0) return std::nullopt;
    std::size_t length = 0;
    for (const char c : records.substr(0, space)) {
      if (c < '0' || c > '9' || length > records.size()) return std::nullopt;
      length = length * 10 + static_cast<std::size_t>(c - '0');
    }
    if (length <= space + 1 || length > records.size() || records[length - 1] != '\n') {
      return std::nullopt;
    }
    const std::string_view record = records.substr(space + 1, length - space - 2);
    const std::size_t equals = record.find('=');
    if (equals == std::string_view::npos) return std::nullopt;
    const std::string_view key = record.substr(0, equals);
    const std::string_view value = record.substr(equals + 1);
    if (key == "path") {
      found.path = std::string(value);
    } else if (key == "size") {
      std::uint64_t size = 0;
      for (const char c : value) {
        if (c < '0' || c > '9' || size > (~std::uint64_t{0} - 9) / 10) return std::nullopt;
        size = size * 10 + static_cast<std::uint64_t>(c - '0');
      }
      found.size = size;
    }
    records.remove_prefix(length);
  }
  return found;
}

}  // namespace detail

/// @brief Reads a tar archive's headers one after another and hands over its regular files,
/// without reading their data.
///
/// A header whose checksum does not hold, a member whose data runs past the archive's end, a
/// pax header that does not parse and an archive that ends inside a header are
/// `crema::format_error`s naming the shard and the byte offset of the header at fault. The end
/// is the first all-zero header block or the archive's last byte.
/// @tparam Shard has `read_at(offset, span<byte>)`, `size()` and `path()` (`shard_file`)
template <class Shard>
class tar_scanner {
 public:
  explicit tar_scanner(const Shard& shard) noexcept : shard_(&shard) {}

  /// @return the next regular file, or nothing at the archive's end
  /// @throws crema::format_error as said above; crema::io_error if a read fails
  [[nodiscard]] std::optional<tar_member> next() {
    std::optional<std::string> long_name;
    std::optional<detail::pax_overrides> pax;
    std::array<std::byte, detail::tar_block> header{};
    for (;;) {
      if (at_ + detail::tar_block > shard_->size()) {
        if (at_ == shard_->size() && !long_name && !pax) return std::nullopt;
        fail("ends inside a header", at_);
      }
      shard_->read_at(at_, header);
      const std::uint64_t header_at = at_;
      if (std::all_of(header.begin(), header.end(),
                      [](std::byte b) { return b == std::byte{0}; })) {
        if (long_name || pax) fail("ends after an extended header, before its member", header_at);
        return std::nullopt;
      }
      const std::span<const std::byte, detail::tar_block> block(header);
      if (!detail::tar_checksum_holds(block))
        fail("holds no tar header (its checksum fails)", header_at);
      const auto size_field = detail::tar_number(block.subspan(124, 12));
      if (!size_field) fail("has a header whose size is not a number", header_at);
      const std::uint64_t size = pax && pax->size ? *pax->size : *size_field;
      const std::uint64_t data = header_at + detail::tar_block;
      if (size > shard_->size() || data > shard_->size() - size) {
        fail(detail::format("has a member of {} bytes that runs past its end", size), header_at);
      }
      at_ = data + (size + detail::tar_block - 1) / detail::tar_block * detail::tar_block;
      const char type = std::to_integer<char>(header[156]);
      if (type == 'L' || type == 'x') {  // GNU long name, or pax: for the next member
        if (size > max_extended_bytes) {
          fail(detail::format("has an extended header of {} bytes", size), header_at);
        }
        std::string text(static_cast<std::size_t>(size), '\0');
        shard_->read_at(data, std::as_writable_bytes(std::span(text)));
        if (type == 'L') {
          long_name = std::string(text.c_str());
        } else {
          pax = detail::parse_pax(text);
          if (!pax) fail("has a pax header that does not parse", header_at);
        }
        continue;
      }
      if (type != '0' && type != '\0' && type != '7') {  // not a regular file: passed over
        long_name.reset();
        pax.reset();
        continue;
      }
      std::string name;
      if (pax && pax->path) {
        name = *pax->path;
      } else if (long_name) {
        name = *long_name;
      } else {
        name = detail::tar_text(block.subspan(0, 100));
        const bool ustar = std::memcmp(header.data() + 257, "ustar", 5) == 0;
        const std::string prefix = ustar ? detail::tar_text(block.subspan(345, 155)) : "";
        if (!prefix.empty()) name = prefix + "/" + name;
      }
      return tar_member{std::move(name), data, size};
    }
  }

  /// @return the offset of the next header to read
  [[nodiscard]] std::uint64_t offset() const noexcept { return at_; }

 private:
  static constexpr std::uint64_t max_extended_bytes = std::uint64_t{1} << 20;

  [[noreturn]] void fail(std::string_view what, std::uint64_t offset) const {
    detail::fail<format_error>("tar shard {}: {} at byte {}", shard_->path(), what, offset);
  }

  const Shard* shard_;
  std::uint64_t at_ = 0;
};

/// @brief Writes a tar archive: a ustar header per member (a pax header first for a name that
/// does not fit ustar's fields), mode 0644, owner 0, time 0, so the same members give the same
/// bytes; then the two zero blocks that end it.
class tar_writer {
 public:
  /// @throws crema::io_error naming the path if it cannot be made
  explicit tar_writer(std::string path) : path_(std::move(path)) {
    out_.open(path_, std::ios::binary | std::ios::trunc);
    if (!out_) detail::fail_with_code<io_error>(errno, "tar_writer: cannot make {}", path_);
  }
  tar_writer(const tar_writer&) = delete;
  tar_writer& operator=(const tar_writer&) = delete;
  ~tar_writer() {
    try {
      finish();
    } catch (...) {  // reported by finish() to those who call it
    }
  }

  /// @brief Appends a regular file.
  /// @throws crema::config_error for an empty name; crema::io_error if a write fails
  void add(std::string_view name, std::span<const std::byte> data) {
    if (name.empty()) detail::fail<config_error>("tar_writer {}: a member needs a name", path_);
    std::string_view prefix;
    std::string_view rest = name;
    if (!split_ustar(name, prefix, rest)) {
      const std::string records = pax_record("path", name);
      write_header("././@PaxHeader", records.size(), 'x', {});
      write_data(std::as_bytes(std::span(records)));
      rest = name.substr(name.size() > 99 ? name.size() - 99 : 0);
      prefix = {};
    }
    write_header(rest, data.size(), '0', prefix);
    write_data(data);
  }

  /// @brief Ends the archive and closes the file. Called by the destructor too, which cannot
  /// report a failure.
  /// @throws crema::io_error if a write fails
  void finish() {
    if (!out_.is_open()) return;
    const std::array<char, 2 * detail::tar_block> end{};
    out_.write(end.data(), end.size());
    out_.close();
    if (!out_) detail::fail_with_code<io_error>(0, "tar_writer: cannot write {}", path_);
  }

  /// @return the bytes written so far
  [[nodiscard]] std::uint64_t bytes() const noexcept { return written_; }

 private:
  // Whether `name` fits ustar's name (100 bytes) and prefix (155) fields, split at a slash.
  static bool split_ustar(std::string_view name, std::string_view& prefix, std::string_view& rest) {
    if (name.size() <= 100) {
      rest = name;
      return true;
    }
    for (std::size_t slash = name.find('/'); slash != std::string_view::npos;
         slash = name.find('/', slash + 1)) {
      if (slash <= 155 && name.size() - slash - 1 <= 100 && slash + 1 < name.size()) {
        prefix = name.substr(0, slash);
        rest = name.substr(slash + 1);
        return true;
      }
    }
    return false;
  }

  static std::string pax_record(std::string_view key, std::string_view value) {
    // The length counts itself: find the number of its digits that makes it consistent.
    const std::size_t body = key.size() + value.size() + 3;  // ' ', '=', '\n'
    std::size_t length = body + 1;
    while (std::to_string(length).size() + body != length) ++length;
    return std::to_string(length) + " " + std::string(key) + "=" + std::string(value) + "\n";
  }

  void write_header(std::string_view name, std::uint64_t size, char type, std::string_view prefix) {
    std::array<char, detail::tar_block> header{};
    const auto put = [&](std::size_t at, std::size_t width, std::string_view text) {
      if (!text.empty()) std::memcpy(header.data() + at, text.data(), std::min(width, text.size()));
    };
    const auto octal = [&](std::size_t at, std::size_t width, std::uint64_t value) {
      std::string digits(width - 1, '0');
      for (std::size_t i = digits.size(); i-- > 0 && value != 0; value /= 8) {
        digits[i] = static_cast<char>('0' + value % 8);
      }
      if (value != 0)
        detail::fail<config_error>("tar_writer {}: a member of too many bytes", path_);
      put(at, width, digits);
    };
    put(0, 100, name);
    octal(100, 8, 0644);
    octal(108, 8, 0);
    octal(116, 8, 0);
    octal(124, 12, size);
    octal(136, 12, 0);
    header[156] = type;
    put(257, 6, std::string_view("ustar\0", 6));
    put(263, 2, "00");
    put(345, 155, prefix);
    std::memset(header.data() + 148, ' ', 8);
    unsigned sum = 0;
    for (const char c : header) sum += static_cast<unsigned char>(c);
    std::string checksum(6, '0');
    for (std::size_t i = 6; i-- > 0; sum /= 8) checksum[i] = static_cast<char>('0' + sum % 8);
    put(148, 6, checksum);
    header[154] = '\0';
    write_data(std::as_bytes(std::span(header)));
  }

  // Data, padded to a whole block.
  void write_data(std::span<const std::byte> data) {
    out_.write(reinterpret_cast<const char*>(data.data()),
               static_cast<std::streamsize>(data.size()));
    const std::size_t pad =
        (detail::tar_block - data.size() % detail::tar_block) % detail::tar_block;
    const std::array<char, detail::tar_block> zeros{};
    out_.write(zeros.data(), static_cast<std::streamsize>(pad));
    if (!out_) detail::fail_with_code<io_error>(0, "tar_writer: cannot write {}", path_);
    written_ += data.size() + pad;
  }

  std::string path_;
  std::ofstream out_;
  std::uint64_t written_ = 0;
};

}  // namespace crema
