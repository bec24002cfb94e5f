#pragma once

#include <crema/core/error.hpp>

#include <glob.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

/// @file
/// Which shards a dataset is: brace notation as WebDataset writes it
/// (`train-{000000..001023}.tar`, `{a,b}`), a shell glob, or a file that lists them, one per line.
/// Component: core.

namespace crema {

namespace detail {

inline constexpr std::size_t most_shard_names = std::size_t{1} << 24;

// The alternatives of one brace group's body: a numeric range "first..last" (zero-padded to the
// wider bound's width when either bound has a leading zero; ascending or descending) or a comma
// list.
[[nodiscard]] inline std::vector<std::string> brace_alternatives(std::string_view pattern,
                                                                 std::string_view body) {
  if (const std::size_t dots = body.find("..");
      dots != std::string_view::npos && body.find(',') == std::string_view::npos) {
    const std::string_view first = body.substr(0, dots);
    const std::string_view last = body.substr(dots + 2);
    const auto number = [&](std::string_view digits) {
      if (digits.empty() || digits.size() > 18 ||
          !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
        fail<config_error>("shard pattern {}: {{{}}} is not a range of two numbers", pattern, body);
      }
      return std::stoull(std::string(digits));
    };
    const std::uint64_t from = number(first);
    const std::uint64_t to = number(last);
    const bool padded =
        (first.size() > 1 && first[0] == '0') || (last.size() > 1 && last[0] == '0');
    const std::size_t width = padded ? std::max(first.size(), last.size()) : 0;
    const std::uint64_t count = (from <= to ? to - from : from - to) + 1;
    if (count > most_shard_names) {
      fail<config_error>("shard pattern {}: {{{}}} names {} shards, more than {}", pattern, body,
                         count, most_shard_names);
    }
    std::vector<std::string> names;
    names.reserve(static_cast<std::size_t>(count));
    for (std::uint64_t i = 0; i < count; ++i) {
      std::string text = std::to_string(from <= to ? from + i : from - i);
      if (text.size() < width) text.insert(0, width - text.size(), '0');
      names.push_back(std::move(text));
    }
    return names;
  }
  std::vector<std::string> names;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = body.find(',', start);
    names.emplace_back(body.substr(start, comma - start));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  if (names.size() < 2) {
    fail<config_error>("shard pattern {}: {{{}}} is neither a range (a..b) nor a list (a,b)",
                       pattern, body);
  }
  return names;
}

}  // namespace detail

/// @brief The names a brace pattern stands for, in order: each `{first..last}` group a numeric
/// range (zero-padded when a bound is written with leading zeros), each `{a,b,c}` group a list;
/// groups multiply out left to right, as the shell's and WebDataset's brace expansion do. Groups
/// do not nest. A pattern without braces is itself.
/// @throws crema::config_error naming the pattern for an unclosed or nested brace, an empty or
///         malformed group, or more than 2^24 names
[[nodiscard]] inline std::vector<std::string> expand_braces(std::string_view pattern) {
  std::vector<std::string> names{""};
  std::size_t at = 0;
  while (at < pattern.size()) {
    const std::size_t open = pattern.find_first_of("{}", at);
    const std::string_view literal = pattern.substr(at, open - at);
    for (std::string& name : names) name += literal;
    if (open == std::string_view::npos) break;
    if (pattern[open] == '}') {
      detail::fail<config_error>("shard pattern {}: a '}}' at character {} closes nothing", pattern,
                                 open);
    }
    const std::size_t close = pattern.find_first_of("{}", open + 1);
    if (close == std::string_view::npos || pattern[close] == '{') {
      detail::fail<config_error>("shard pattern {}: the '{{' at character {} is not closed{}",
                                 pattern, open,
                                 close == std::string_view::npos ? "" : " before another opens");
    }
    const auto alternatives =
        detail::brace_alternatives(pattern, pattern.substr(open + 1, close - open - 1));
    if (names.size() * alternatives.size() > detail::most_shard_names) {
      detail::fail<config_error>("shard pattern {}: names more than {} shards", pattern,
                                 detail::most_shard_names);
    }
    std::vector<std::string> product;
    product.reserve(names.size() * alternatives.size());
    for (const std::string& name : names) {
      for (const std::string& alternative : alternatives) product.push_back(name + alternative);
    }
    names = std::move(product);
    at = close + 1;
  }
  return names;
}

/// @brief The shards a pattern names: brace groups expanded, then, where a name has a glob
/// character (`*`, `?`, `[`), the files it matches, sorted. A brace name without one is taken as
/// it is (it may be a URL, or a file made later).
/// @throws crema::config_error naming the pattern as `expand_braces`, or for a glob that
///         matches nothing
[[nodiscard]] inline std::vector<std::string> shard_paths(std::string_view pattern) {
  std::vector<std::string> paths;
  for (std::string& name : expand_braces(pattern)) {
    if (name.find_first_of("*?[") == std::string::npos) {
      paths.push_back(std::move(name));
      continue;
    }
    glob_t found{};
    const int status = ::glob(name.c_str(), 0, nullptr, &found);
    if (status == 0) {
      for (std::size_t i = 0; i < found.gl_pathc; ++i) paths.emplace_back(found.gl_pathv[i]);
    }
    ::globfree(&found);
    if (status != 0)
      detail::fail<config_error>("shard pattern {}: {} matches no file", pattern, name);
  }
  return paths;
}

/// @brief The shards a list file names, one per line (blank lines and lines starting with `#`
/// passed over, spaces around a name trimmed); a relative path is taken from the list's folder.
/// @throws crema::io_error naming the file if it does not open; crema::config_error naming it if
///         it names no shard
[[nodiscard]] inline std::vector<std::string> read_shard_list(const std::filesystem::path& list) {
  std::ifstream in(list);
  if (!in) detail::fail_with_code<io_error>(errno, "shard list {}: cannot open", list.string());
  std::vector<std::string> paths;
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#') continue;
    const std::size_t last = line.find_last_not_of(" \t\r");
    std::string name = line.substr(first, last - first + 1);
    const bool url = name.find("://") != std::string::npos;
    if (!url && std::filesystem::path(name).is_relative()) {
      name = (list.parent_path() / name).string();
    }
    paths.push_back(std::move(name));
  }
  if (paths.empty()) detail::fail<config_error>("shard list {}: names no shard", list.string());
  return paths;
}

}  // namespace crema
