#pragma once

// A training progress bar: steps done, samples per second, a smoothed loss and the fraction of
// the participants' time spent waiting for data. On a terminal it is redrawn in place; into a
// file or a pipe it is a plain line every tenth of the run.

#include <fmt/core.h>

#include <unistd.h>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>

namespace demo {

// How the progress is shown: redrawn in place, plain lines, or redrawn when stdout is a terminal.
enum class progress_style { automatic, bar, lines };

class progress_bar {
 public:
  progress_bar(std::size_t steps, std::size_t samples_per_step,
               progress_style style = progress_style::automatic)
      : steps_(steps),
        samples_per_step_(samples_per_step),
        terminal_(style == progress_style::automatic ? ::isatty(::fileno(stdout)) != 0
                                                     : style == progress_style::bar),
        start_(clock::now()) {}

  // After step `step` (counted from 1): `loss` is the step's mean loss; `waiting(seconds)`, asked
  // only when a line is drawn, the fraction of the participants' time since the start, `seconds`
  // ago, spent waiting for a batch.
  template <class Waiting>
  void update(std::size_t step, float loss, Waiting&& waiting) {
    smoothed_ = step == 1 ? loss : 0.9f * smoothed_ + 0.1f * loss;
    const bool last = step == steps_;
    if (terminal_) {
      if (!last && clock::now() - drawn_ < std::chrono::milliseconds(100)) return;
    } else if (!last && step * 10 / steps_ == (step - 1) * 10 / steps_) {
      return;  // a plain line at each tenth only
    }
    drawn_ = clock::now();
    const double seconds = std::chrono::duration<double>(drawn_ - start_).count();
    constexpr std::size_t width = 30;
    const std::size_t filled = step * width / steps_;
    const std::string bar = std::string(filled, '#') + std::string(width - filled, '-');
    const std::string line = fmt::format(
        "[{}] {:3}%  step {}/{}  {:.0f} samples/s  loss {:.3f}  waiting for data {:.1f}%", bar,
        step * 100 / steps_, step, steps_, static_cast<double>(step * samples_per_step_) / seconds,
        smoothed_, 100.0 * waiting(seconds));
    if (terminal_) {
      fmt::print("\r{}\033[K{}", line, last ? "\n" : "");
    } else {
      fmt::print("{}\n", line);
    }
    std::fflush(stdout);
  }

  [[nodiscard]] double seconds() const {
    return std::chrono::duration<double>(clock::now() - start_).count();
  }

 private:
  using clock = std::chrono::steady_clock;
  std::size_t steps_;
  std::size_t samples_per_step_;
  bool terminal_;
  clock::time_point start_;
  clock::time_point drawn_{};
  float smoothed_ = 0.0f;
};

}  // namespace demo
