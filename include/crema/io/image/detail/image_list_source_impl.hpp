#pragma once

#include <crema/core/detail/library_inline.hpp>
#include <crema/core/error.hpp>
#include <crema/io/image/image_file.hpp>
#include <crema/io/image/image_list_source.hpp>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <system_error>

// image_list_source's parse: compiled once in the crema::image library (src/image/), or included
// by image_list_source.hpp, inline, with CREMA_HEADER_ONLY.

namespace crema {

namespace detail {

// The blanks a list line may have around its words.
CREMA_LIBRARY_INLINE bool is_list_space(char c) noexcept {
  return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}
CREMA_LIBRARY_INLINE std::string_view trim_list_line(std::string_view text) noexcept {
  while (!text.empty() && is_list_space(text.front())) text.remove_prefix(1);
  while (!text.empty() && is_list_space(text.back())) text.remove_suffix(1);
  return text;
}
// The line as an error shows it: at most 80 characters.
CREMA_LIBRARY_INLINE std::string shown_list_line(std::string_view line) {
  return line.size() <= 80 ? std::string(line) : std::string(line.substr(0, 77)) + "...";
}

}  // namespace detail

CREMA_LIBRARY_INLINE detail::image_file_table image_list_source::parse(const std::string& list,
                                                                       const std::string& root) {
  image_file_reader reader;
  const std::span<const std::byte> bytes = reader.read(list, "image list");
  const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());

  detail::image_file_table table;
  std::size_t line_number = 0;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    ++line_number;
    add_line(table, detail::trim_list_line(text.substr(start, end - start)), list, line_number,
             root);
    start = end + 1;
  }
  if (table.size() == 0) {
    detail::fail<config_error>("image_list_source: list {} names no file", list);
  }
  return table;
}

CREMA_LIBRARY_INLINE void image_list_source::add_line(detail::image_file_table& table,
                                                      std::string_view line,
                                                      const std::string& list, std::size_t number,
                                                      const std::string& root) {
  if (line.empty()) return;
  std::size_t split = line.size();
  while (split > 0 && !detail::is_list_space(line[split - 1])) --split;
  if (split == 0) {
    detail::fail<format_error>("image_list_source: {} line {}: expected 'path label', got '{}'",
                               list, number, detail::shown_list_line(line));
  }
  const std::string_view label_text = line.substr(split);
  const std::string_view path = detail::trim_list_line(line.substr(0, split));
  std::int64_t label = 0;
  const auto [end, status] =
      std::from_chars(label_text.data(), label_text.data() + label_text.size(), label);
  if (status == std::errc::result_out_of_range ||
      (status == std::errc{} && end == label_text.data() + label_text.size() &&
       (label < std::numeric_limits<std::int32_t>::min() ||
        label > std::numeric_limits<std::int32_t>::max()))) {
    detail::fail<format_error>("image_list_source: {} line {}: label {} is out of the range of int",
                               list, number, label_text);
  }
  if (status != std::errc{} || end != label_text.data() + label_text.size()) {
    detail::fail<format_error>("image_list_source: {} line {}: label '{}' is not an integer", list,
                               number, detail::shown_list_line(label_text));
  }
  const std::filesystem::path relative = std::filesystem::path(path).lexically_normal();
  const bool leaves_root = relative.is_absolute() || relative.has_root_name() ||
                           (!relative.empty() && *relative.begin() == "..");
  if (leaves_root) {
    detail::fail<format_error>("image_list_source: {} line {}: path {} leaves the root {}", list,
                               number, detail::shown_list_line(path), root);
  }
  if (relative.empty() || relative == "." || !relative.has_filename()) {
    detail::fail<format_error>("image_list_source: {} line {}: path '{}' names no file", list,
                               number, detail::shown_list_line(path));
  }
  table.add(relative.string(), static_cast<std::int32_t>(label), number);
}

}  // namespace crema
