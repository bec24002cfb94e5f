#pragma once

// The demo's command line: --name=value options over the training settings, shared by
// crema-demo and crema-mpi-train.

#include "progress.hpp"
#include "train.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <variant>

namespace demo {

struct command_line {
  settings train;
  std::optional<std::filesystem::path> data;  // keep the databases here (made if missing)
  double expect = 0.90;                       // exit 1 below this test accuracy
  std::optional<double> compare_to;           // exit 1 more than a point away from it
  progress_style progress = progress_style::automatic;
};

inline constexpr std::string_view usage =
    "options (all --name=value):\n"
    "  --participants=N  solvers in all (default 2)\n"
    "  --batch=N         records per solver and step (default 32)\n"
    "  --steps=N         training steps (default 4000)\n"
    "  --hidden=N        hidden units (default 128)\n"
    "  --rate=X          the first learning rate (default 0.01)\n"
    "  --train=N --test=N  images in the two databases (default 12000 and 2000)\n"
    "  --data=DIR        make (or reuse) the databases in DIR and keep them\n"
    "  --expect=X        exit 1 if the test accuracy is below X (default 0.90)\n"
    "  --compare-to=X    exit 1 if the test accuracy is more than 0.01 away from X\n"
    "  --progress=bar|lines  redraw the progress in place, or print a line per tenth (default:\n"
    "                    redrawn on a terminal; crema-mpi-train: lines, unless asked)\n";

// Parses argv; throws std::invalid_argument naming the option at fault.
inline command_line parse(std::span<char* const> args) {
  command_line line;
  settings& s = line.train;
  std::string_view option;  // the one being read, for the errors
  const auto number = [&option](std::string_view text, auto& out) {
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
    if (error != std::errc{} || end != text.data() + text.size()) {
      throw std::invalid_argument(
          fmt::format("--{}={}: not a number of the right kind", option, text));
    }
  };
  const auto style = [&option](std::string_view text, progress_style& out) {
    if (text != "bar" && text != "lines") {
      throw std::invalid_argument(fmt::format("--{}={}: bar or lines", option, text));
    }
    out = text == "bar" ? progress_style::bar : progress_style::lines;
  };
  using setter = std::function<void(std::string_view)>;
  const std::pair<std::string_view, setter> known[] = {
      {"participants", [&](std::string_view v) { number(v, s.participants); }},
      {"batch", [&](std::string_view v) { number(v, s.batch); }},
      {"steps", [&](std::string_view v) { number(v, s.steps); }},
      {"hidden", [&](std::string_view v) { number(v, s.hidden); }},
      {"rate", [&](std::string_view v) { number(v, s.learning_rate); }},
      {"train", [&](std::string_view v) { number(v, s.train_records); }},
      {"test", [&](std::string_view v) { number(v, s.test_records); }},
      {"expect", [&](std::string_view v) { number(v, line.expect); }},
      {"compare-to", [&](std::string_view v) { number(v, line.compare_to.emplace()); }},
      {"data", [&](std::string_view v) { line.data = std::filesystem::path(v); }},
      {"progress", [&](std::string_view v) { style(v, line.progress); }},
  };
  for (const std::string_view arg : args.subspan(1)) {
    const auto equals = arg.find('=');
    option = arg.starts_with("--") ? arg.substr(2, equals - 2) : arg;
    const auto found =
        std::ranges::find(known, option, &std::pair<std::string_view, setter>::first);
    if (equals == std::string_view::npos || found == std::end(known)) {
      throw std::invalid_argument(fmt::format("{}: not an option\n{}", arg, usage));
    }
    found->second(arg.substr(equals + 1));
  }
  if (s.participants == 0 || s.batch == 0 || s.steps == 0 || s.hidden == 0 ||
      s.train_records <= 0 || s.test_records <= 0) {
    throw std::invalid_argument(
        "--participants, --batch, --steps, --hidden, --train and --test must be positive");
  }
  return line;
}

// The command line of `program` (crema-demo, crema-cuda-demo): the options, or, where it asks
// for --help (usage printed) or is wrong (the error printed on stderr), the exit status to return
// (0 or 2).
inline std::variant<command_line, int> read_command_line(int argc, char** argv,
                                                         std::string_view program) {
  try {
    if (argc > 1 && std::string_view(argv[1]) == "--help") {
      fmt::print("{}", usage);
      return 0;
    }
    return parse(std::span(argv, static_cast<std::size_t>(argc)));
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: {}\n", program, e.what());
    return 2;
  }
}

// Whether the file `stamp` says `made`: data made before with the same counts.
inline bool stamped(const std::filesystem::path& stamp, const std::string& made) {
  std::ifstream in(stamp);
  if (!in) return false;
  const std::string there((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return there == made;
}

// The databases: made in `folder` unless the ones there were made with the same counts (a file
// beside them says which).
inline void make_datasets(const std::filesystem::path& folder, const settings& s) {
  const std::string made =
      fmt::format("shapes: {} train, {} test\n", s.train_records, s.test_records);
  const auto stamp = folder / "made-by-crema-demo";
  if (stamped(stamp, made)) return;
  std::filesystem::remove_all(folder / "train");
  std::filesystem::remove_all(folder / "test");
  write_shapes(folder / "train", s.train_records, 1);
  write_shapes(folder / "test", s.test_records, 2);
  std::ofstream(stamp) << made;
}

// The folder of the databases: --data's (kept), or a fresh temporary one, removed on the way out
// whatever happens.
class data_folder {
 public:
  data_folder(const command_line& line, std::string_view name)
      : path_(line.data.value_or(std::filesystem::temp_directory_path() /
                                 fmt::format("{}-{}", name, std::random_device{}()))),
        keep_(line.data.has_value()) {}
  data_folder(const data_folder&) = delete;
  data_folder& operator=(const data_folder&) = delete;
  ~data_folder() {
    std::error_code ignored;
    if (!keep_) std::filesystem::remove_all(path_, ignored);
  }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
  bool keep_;
};

// Prints the test accuracy, and returns the exit status: 1 if it is below --expect or more than
// a point from --compare-to (saying so on stderr), else 0.
inline int report(const command_line& line, double accuracy, std::string_view program) {
  fmt::print("test accuracy: {:.3f}\n", accuracy);
  std::fflush(stdout);
  if (accuracy < line.expect) {
    fmt::print(stderr, "{}: test accuracy {:.3f} is below the {:.3f} expected\n", program, accuracy,
               line.expect);
    return 1;
  }
  if (line.compare_to && std::abs(accuracy - *line.compare_to) > 0.01) {
    fmt::print(stderr, "{}: test accuracy {:.3f} is more than 0.01 from {:.3f}\n", program,
               accuracy, *line.compare_to);
    return 1;
  }
  return 0;
}

}  // namespace demo
