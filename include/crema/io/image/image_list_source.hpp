#pragma once

#include <crema/core/error.hpp>
#include <crema/io/image/detail/image_file_source.hpp>
#include <crema/io/image/image_file.hpp>
#include <crema/pipeline/source.hpp>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace crema {

/// @brief A source over Caffe's `ImageData` list file: one `relative/path label` per line, the
/// paths under a root folder.
///
/// The label is the last word of a line (so paths may hold spaces) and an integer in the range
/// of `int`; blank lines are skipped, a line may end in "\r\n". Paths are relative to the root
/// and may not leave it (no absolute path, no ".." above it). Files are listed in the list's
/// order; nothing is read from them until a transform reads one (`image_file_reader`), and a
/// missing file is an error then, naming the file and its line.
///
/// An indexed source (`shard_cursor`): shuffle, shard, seek and epochs as every indexed source.
/// One thread at a time, as every source.
class image_list_source : public detail::image_file_source<image_list_source> {
 public:
  static constexpr const char* source_name = "image_list_source";

  /// @brief Reads the list once.
  /// @param list the list file
  /// @param root the folder the paths are relative to
  /// @throws crema::io_error naming the list if it cannot be read; crema::format_error naming
  ///         the list and the line for a line without a label, a label that is not an integer
  ///         or is out of `int`'s range, or a path that is empty or leaves the root;
  ///         crema::config_error naming the list if it names no file
  image_list_source(const std::filesystem::path& list, const std::filesystem::path& root)
      : detail::image_file_source<image_list_source>(root.string(), list.string(),
                                                     parse(list, root)) {}

  [[nodiscard]] std::string key() const { return "image_list:" + list() + "@" + this->root(); }
  /// @return the list file's path
  [[nodiscard]] std::string list() const { return std::string(file(0).list); }

 private:
  static detail::image_file_table parse(const std::filesystem::path& list_path,
                                        const std::filesystem::path& root) {
    const std::string list = list_path.string();
    image_file_reader reader;
    const std::span<const std::byte> bytes = reader.read(list, "image list");
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());

    detail::image_file_table table;
    std::size_t line_number = 0;
    for (std::size_t start = 0; start < text.size();) {
      std::size_t end = text.find('\n', start);
      if (end == std::string_view::npos) end = text.size();
      ++line_number;
      add_line(table, trim(text.substr(start, end - start)), list, line_number, root);
      start = end + 1;
    }
    if (table.size() == 0) {
      detail::fail<config_error>("image_list_source: list {} names no file", list);
    }
    return table;
  }

  static bool is_space(char c) noexcept {
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
  }
  static std::string_view trim(std::string_view text) noexcept {
    while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
    while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
    return text;
  }
  // The line as an error shows it: at most 80 characters.
  static std::string shown(std::string_view line) {
    return line.size() <= 80 ? std::string(line) : std::string(line.substr(0, 77)) + "...";
  }

  static void add_line(detail::image_file_table& table, std::string_view line,
                       const std::string& list, std::size_t number,
                       const std::filesystem::path& root) {
    if (line.empty()) return;
    std::size_t split = line.size();
    while (split > 0 && !is_space(line[split - 1])) --split;
    if (split == 0) {
      detail::fail<format_error>("image_list_source: {} line {}: expected 'path label', got '{}'",
                                 list, number, shown(line));
    }
    const std::string_view label_text = line.substr(split);
    const std::string_view path = trim(line.substr(0, split));
    std::int64_t label = 0;
    const auto [end, status] =
        std::from_chars(label_text.data(), label_text.data() + label_text.size(), label);
    if (status == std::errc::result_out_of_range ||
        (status == std::errc{} && end == label_text.data() + label_text.size() &&
         (label < std::numeric_limits<std::int32_t>::min() ||
          label > std::numeric_limits<std::int32_t>::max()))) {
      detail::fail<format_error>(
          "image_list_source: {} line {}: label {} is out of the range of int", list, number,
          label_text);
    }
    if (status != std::errc{} || end != label_text.data() + label_text.size()) {
      detail::fail<format_error>("image_list_source: {} line {}: label '{}' is not an integer",
                                 list, number, shown(label_text));
    }
    const std::filesystem::path relative = std::filesystem::path(path).lexically_normal();
    const bool leaves_root = relative.is_absolute() || relative.has_root_name() ||
                             (!relative.empty() && *relative.begin() == "..");
    if (leaves_root) {
      detail::fail<format_error>("image_list_source: {} line {}: path {} leaves the root {}", list,
                                 number, shown(path), root.string());
    }
    if (relative.empty() || relative == "." || !relative.has_filename()) {
      detail::fail<format_error>("image_list_source: {} line {}: path '{}' names no file", list,
                                 number, shown(path));
    }
    table.add(relative.string(), static_cast<std::int32_t>(label), number);
  }
};

static_assert(record_source<image_list_source>);
static_assert(keyed_record_source<image_list_source>);

}  // namespace crema
