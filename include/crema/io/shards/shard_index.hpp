#pragma once

#include <crema/core/error.hpp>
#include <crema/io/shards/shard_file.hpp>
#include <crema/io/shards/tfrecord.hpp>
#include <crema/io/shards/webdataset.hpp>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

/// @file
/// Index files of shards in DALI's formats, which DALI's readers take and its tools write
/// (`wds2idx` for WebDataset tar shards, `tfrecord2idx` for TFRecord files), read and written by
/// crema (`crema-shards index`): a source given them opens without reading the shards' headers,
/// one small file per shard instead, which on a network filesystem is most of the opening's time.
///
/// - WebDataset, version 1.2: a first line `v1.2 <samples>`, then a line per sample holding, for
///   each member in the shard's order, `<extension> <data offset> <size> <member name>`.
/// - TFRecord: a line per record, `<offset of its header> <bytes from header to CRC's end>`.
///
/// An index is text; every fault in it (a version other than 1.2, a count that disagrees, a
/// member past the shard's end or out of order, a line that does not parse) is a
/// `crema::format_error` naming the index, its line and the shard. Component: core.

namespace crema {

/// @brief The index files of a source's shards, one a shard, in the shards' order: what
/// `webdataset_source(shards, indexes)` and `tfrecord_source(shards, indexes)` open from.
struct shard_indexes {
  std::vector<std::string> paths;
};

namespace detail {

// The whole text of index file `path`: a file, or a URL read through `storage`.
[[nodiscard]] inline std::string read_index_file(
    const std::string& path, const std::shared_ptr<const shard_storage>& storage = nullptr) {
  if (is_url(path)) {
    const shard_file file(path, storage);
    std::string text(static_cast<std::size_t>(file.size()), '\0');
    file.read_at(0, std::as_writable_bytes(std::span(text)));
    return text;
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) fail_with_code<io_error>(errno, "shard index {}: cannot open", path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail_with_code<io_error>(errno, "shard index {}: cannot read", path);
  return text;
}

// Index text, line by line, that names where a fault lies.
class index_lines {
 public:
  index_lines(std::string_view text, std::string_view index, std::string_view shard) noexcept
      : text_(text), index_(index), shard_(shard) {}

  // The next line that is not blank, split at spaces; false at the end.
  bool next(std::vector<std::string_view>& tokens) {
    tokens.clear();
    while (tokens.empty()) {
      if (at_ >= text_.size()) return false;
      std::size_t end = text_.find('\n', at_);
      if (end == std::string_view::npos) end = text_.size();
      std::string_view line = text_.substr(at_, end - at_);
      at_ = end + 1;
      ++line_;
      while (!line.empty()) {
        const std::size_t start = line.find_first_not_of(" \t\r");
        if (start == std::string_view::npos) break;
        line.remove_prefix(start);
        const std::size_t stop = std::min(line.find_first_of(" \t\r"), line.size());
        tokens.push_back(line.substr(0, stop));
        line.remove_prefix(stop);
      }
    }
    return true;
  }

  [[nodiscard]] std::uint64_t number(std::string_view token, std::string_view what) const {
    std::uint64_t value = 0;
    const auto [end, error] = std::from_chars(token.data(), token.data() + token.size(), value);
    if (error != std::errc{} || end != token.data() + token.size()) {
      fault(format("its {} '{}' is not a number", what, token.substr(0, 32)));
    }
    return value;
  }

  [[noreturn]] void fault(std::string_view what) const {
    fail<format_error>("shard index {} (of shard {}), line {}: {}", index_, shard_, line_, what);
  }

 private:
  std::string_view text_;
  std::string_view index_;
  std::string_view shard_;
  std::size_t at_ = 0;
  std::size_t line_ = 0;
};

}  // namespace detail

/// @brief The samples of WebDataset shard `shard` as its index `text` (the file `index`, DALI's
/// version 1.2) has them: what `index_webdataset` finds by reading the shard's headers. Members
/// whose file name starts with `__` are left out, as there.
/// @tparam Shard has `size()` and `path()` (`shard_file`)
/// @throws crema::format_error naming the index, the line and the shard for a version other
///         than 1.2, a sample count that disagrees with the lines, a line that does not parse, a
///         member past the shard's end, members out of the shard's order or of another sample's
///         key, and two members of one extension
template <class Shard>
[[nodiscard]] std::vector<webdataset_entry> read_webdataset_index(std::string_view text,
                                                                  std::string_view index,
                                                                  const Shard& shard) {
  detail::index_lines lines(text, index, shard.path());
  std::vector<std::string_view> tokens;
  if (!lines.next(tokens)) {
    detail::fail<format_error>("shard index {} (of shard {}): it is empty", index, shard.path());
  }
  if (tokens.size() != 2 || tokens[0] != "v1.2") {
    lines.fault(detail::format(
        "its first line is '{}', where DALI's version 1.2 has 'v1.2 <samples>' (wds2idx, "
        "crema-shards index write it)",
        tokens.empty() ? std::string_view() : tokens[0]));
  }
  const std::uint64_t count = lines.number(tokens[1], "sample count");
  std::vector<webdataset_entry> samples;
  std::uint64_t lines_read = 0;
  std::uint64_t end_of_last = 0;
  while (lines.next(tokens)) {
    ++lines_read;
    if (tokens.size() % 4 != 0) {
      lines.fault(
          detail::format("{} fields, where each member has 4 (extension, offset, size, "
                         "name)",
                         tokens.size()));
    }
    webdataset_entry entry;
    for (std::size_t t = 0; t < tokens.size(); t += 4) {
      const std::uint64_t offset = lines.number(tokens[t + 1], "offset");
      const std::uint64_t size = lines.number(tokens[t + 2], "size");
      const std::string_view name = tokens[t + 3];
      if (offset < end_of_last) {
        lines.fault(
            detail::format("member {} at byte {} lies before the end of the one before "
                           "it (byte {}): not in the shard's order",
                           name, offset, end_of_last));
      }
      if (offset > shard.size() || size > shard.size() - offset) {
        lines.fault(
            detail::format("member {} ({} bytes at byte {}) runs past the shard's end "
                           "({} bytes)",
                           name, size, offset, shard.size()));
      }
      end_of_last = offset + size;
      if (webdataset_passed_over(name)) continue;
      auto [key, extension] = webdataset_split(name);
      if (entry.members.empty()) {
        entry.key.assign(key);
      } else if (key != entry.key) {
        lines.fault(
            detail::format("member {} is not of sample {}, whose line it is on", name, entry.key));
      }
      for (const webdataset_member& member : entry.members) {
        if (member.extension == extension) {
          lines.fault(
              detail::format("sample {} has two members of extension '{}'", entry.key, extension));
        }
      }
      entry.members.push_back({std::move(extension), offset, size});
    }
    if (!entry.members.empty()) samples.push_back(std::move(entry));
  }
  if (lines_read != count) {
    lines.fault(
        detail::format("its first line counts {} samples, its lines {}", count, lines_read));
  }
  return samples;
}

/// @brief The records of TFRecord file `shard` as its index `text` (the file `index`, DALI's
/// format) has them. Their headers are not read here: reading a record so placed checks its
/// header too (`tfrecord_location::header_checked` false).
/// @throws crema::format_error naming the index, the line and the shard for a line that does not
///         parse, a record shorter than its framing, past the shard's end or out of order
template <class Shard>
[[nodiscard]] std::vector<tfrecord_location> read_tfrecord_index(std::string_view text,
                                                                 std::string_view index,
                                                                 const Shard& shard) {
  constexpr std::uint64_t framing = detail::tfrecord_header + detail::tfrecord_footer;
  detail::index_lines lines(text, index, shard.path());
  std::vector<std::string_view> tokens;
  std::vector<tfrecord_location> records;
  std::uint64_t end_of_last = 0;
  while (lines.next(tokens)) {
    if (tokens.size() != 2) {
      lines.fault(detail::format("{} fields, where a record has 2 (offset, size)", tokens.size()));
    }
    const std::uint64_t offset = lines.number(tokens[0], "offset");
    const std::uint64_t size = lines.number(tokens[1], "size");
    if (size < framing) {
      lines.fault(
          detail::format("a record of {} bytes at byte {} is shorter than its framing "
                         "({} bytes)",
                         size, offset, framing));
    }
    if (offset < end_of_last) {
      lines.fault(
          detail::format("the record at byte {} starts before the one before it ends "
                         "(byte {})",
                         offset, end_of_last));
    }
    if (offset > shard.size() || size > shard.size() - offset) {
      lines.fault(
          detail::format("the record of {} bytes at byte {} runs past the shard's end "
                         "({} bytes)",
                         size, offset, shard.size()));
    }
    end_of_last = offset + size;
    records.push_back({offset + detail::tfrecord_header, size - framing, false});
  }
  return records;
}

/// @return the index text (DALI's version 1.2) of a WebDataset shard whose samples are `samples`
///         (`index_webdataset`'s); member names are the key, a dot and the extension
[[nodiscard]] inline std::string webdataset_index_text(
    const std::vector<webdataset_entry>& samples) {
  std::string out = "v1.2 " + std::to_string(samples.size()) + "\n";
  for (const webdataset_entry& sample : samples) {
    for (std::size_t m = 0; m < sample.members.size(); ++m) {
      const webdataset_member& member = sample.members[m];
      if (m != 0) out += ' ';
      out += member.extension + ' ' + std::to_string(member.offset) + ' ' +
             std::to_string(member.size) + ' ' + sample.key + '.' + member.extension;
    }
    out += '\n';
  }
  return out;
}

/// @return the index text (DALI's format) of a TFRecord file whose records are `records`
///         (`index_tfrecord`'s)
[[nodiscard]] inline std::string tfrecord_index_text(
    const std::vector<tfrecord_location>& records) {
  std::string out;
  for (const tfrecord_location& record : records) {
    out += std::to_string(record.offset - detail::tfrecord_header) + ' ' +
           std::to_string(record.size + detail::tfrecord_header + detail::tfrecord_footer) + '\n';
  }
  return out;
}

}  // namespace crema
