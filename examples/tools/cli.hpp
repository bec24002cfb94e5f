#pragma once

// The command lines of crema's tools: positional arguments, `--flag`s and `--option value`s,
// each refused by name when it is unknown, missing or not a number.

#include <crema/core/error.hpp>

#include <fmt/format.h>

#include <charconv>
#include <cstddef>
#include <cstdio>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace crema::tools {

/// A command line that does not say what the tool needs: the tool prints its usage.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class arguments {
 public:
  /// @param flags   options without a value ("--mirror")
  /// @param options options with one ("--batch 64")
  arguments(int argc, char** argv, int first, std::set<std::string> flags,
            std::set<std::string> options) {
    for (int i = first; i < argc; ++i) {
      const std::string_view arg = argv[i];
      if (!arg.starts_with("--")) {
        positional_.emplace_back(arg);
        continue;
      }
      const std::string name(arg.substr(2));
      if (flags.contains(name)) {
        flags_.insert(name);
      } else if (options.contains(name)) {
        if (i + 1 >= argc) throw usage_error(fmt::format("--{} needs a value", name));
        values_[name] = argv[++i];
      } else {
        throw usage_error(fmt::format("unknown option --{}", name));
      }
    }
  }

  /// @return positional argument `i`, which names `what` in the error when missing
  [[nodiscard]] const std::string& positional(std::size_t i, std::string_view what) const {
    if (i >= positional_.size()) throw usage_error(fmt::format("missing {}", what));
    return positional_[i];
  }
  [[nodiscard]] std::size_t positional_count() const noexcept { return positional_.size(); }
  /// @brief Refuses positional arguments past the first `count` (a usage error naming the first
  /// one too many).
  void allow_positionals(std::size_t count) const {
    if (positional_.size() > count) {
      throw usage_error(fmt::format("unexpected argument '{}'", positional_[count]));
    }
  }
  [[nodiscard]] bool flag(const std::string& name) const { return flags_.contains(name); }
  [[nodiscard]] std::optional<std::string> option(const std::string& name) const {
    const auto found = values_.find(name);
    if (found == values_.end()) return std::nullopt;
    return found->second;
  }
  /// @return the option as a whole number, or `fallback` when absent
  [[nodiscard]] std::size_t count(const std::string& name, std::size_t fallback) const {
    const auto text = option(name);
    return text ? to_count(*text, "--" + name) : fallback;
  }
  /// @return the option as a real number, or `fallback` when absent
  [[nodiscard]] double real(const std::string& name, double fallback) const {
    const auto text = option(name);
    return text ? to_real(*text, "--" + name) : fallback;
  }

  static std::size_t to_count(std::string_view text, std::string_view what) {
    std::size_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end != text.data() + text.size()) {
      throw usage_error(fmt::format("{} must be a whole number, not '{}'", what, text));
    }
    return value;
  }
  static double to_real(std::string_view text, std::string_view what) {
    try {
      std::size_t used = 0;
      const double value = std::stod(std::string(text), &used);
      if (used == text.size()) return value;
    } catch (const std::exception&) {
    }
    throw usage_error(fmt::format("{} must be a number, not '{}'", what, text));
  }

 private:
  std::vector<std::string> positional_;
  std::set<std::string> flags_;
  std::map<std::string, std::string> values_;
};

/// Runs a tool's body: `--help` or `-h` anywhere on the command line prints the usage on
/// standard output instead (exit 0); a usage error prints the usage (exit 2), any other error
/// its message (exit 1).
template <class Body>
int run_tool(std::string_view tool, std::string_view usage, int argc, char** argv, Body body) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      fmt::print("{}", usage);
      return 0;
    }
  }
  try {
    return body();
  } catch (const usage_error& error) {
    fmt::print(stderr, "{}: {}\n\n{}", tool, error.what(), usage);
    return 2;
  } catch (const std::exception& error) {
    fmt::print(stderr, "{}: {}\n", tool, error.what());
    try {
      std::rethrow_if_nested(error);
    } catch (const std::exception& cause) {
      fmt::print(stderr, "  because: {}\n", cause.what());
    } catch (...) {
    }
    return 1;
  }
}

}  // namespace crema::tools
