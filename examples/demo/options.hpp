#pragma once

// The demo's command line: --name=value options over the training settings, shared by
// crema-demo and crema-mpi-train.

#include "train.hpp"

#include <charconv>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>

namespace demo {

struct command_line {
  settings train;
  std::optional<std::filesystem::path> data;  // keep the databases here (made if missing)
  double expect = 0.90;                       // exit 1 below this test accuracy
  std::optional<double> compare_to;           // exit 1 more than a point away from it
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
    "  --compare-to=X    exit 1 if the test accuracy is more than 0.01 away from X\n";

// Parses argv; throws std::invalid_argument naming the option at fault.
inline command_line parse(std::span<char* const> args) {
  command_line line;
  const auto number = [](std::string_view option, std::string_view text, auto& out) {
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
    if (error != std::errc{} || end != text.data() + text.size()) {
      throw std::invalid_argument("--" + std::string(option) + "=" + std::string(text) +
                                  ": not a number of the right kind");
    }
  };
  for (const std::string_view arg : args.subspan(1)) {
    const auto equals = arg.find('=');
    if (!arg.starts_with("--") || equals == std::string_view::npos) {
      throw std::invalid_argument(std::string(arg) + ": options are --name=value\n" +
                                  std::string(usage));
    }
    const std::string_view name = arg.substr(2, equals - 2);
    const std::string_view value = arg.substr(equals + 1);
    settings& s = line.train;
    if (name == "participants") number(name, value, s.participants);
    else if (name == "batch") number(name, value, s.batch);
    else if (name == "steps") number(name, value, s.steps);
    else if (name == "hidden") number(name, value, s.hidden);
    else if (name == "rate") number(name, value, s.learning_rate);
    else if (name == "train") number(name, value, s.train_records);
    else if (name == "test") number(name, value, s.test_records);
    else if (name == "expect") number(name, value, line.expect);
    else if (name == "compare-to") line.compare_to.emplace(), number(name, value, *line.compare_to);
    else if (name == "data") line.data = std::filesystem::path(value);
    else throw std::invalid_argument("unknown option --" + std::string(name) + "\n" + std::string(usage));
  }
  if (line.train.participants == 0 || line.train.batch == 0 || line.train.steps == 0 ||
      line.train.hidden == 0 || line.train.train_records <= 0 || line.train.test_records <= 0) {
    throw std::invalid_argument("--participants, --batch, --steps, --hidden, --train and --test must be positive");
  }
  return line;
}

// The databases: made in `folder` unless the ones there were made with the same counts (a file
// beside them says which).
inline void make_datasets(const std::filesystem::path& folder, const settings& s) {
  const std::string made = fmt::format("shapes: {} train, {} test\n", s.train_records, s.test_records);
  const auto stamp = folder / "made-by-crema-demo";
  if (std::ifstream in(stamp); in) {
    const std::string there((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (there == made) return;
  }
  std::filesystem::remove_all(folder / "train");
  std::filesystem::remove_all(folder / "test");
  write_shapes(folder / "train", s.train_records, 1);
  write_shapes(folder / "test", s.test_records, 2);
  std::ofstream(stamp) << made;
}

}  // namespace demo
