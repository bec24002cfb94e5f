#pragma once

#include "common/machine.hpp"

// A main for crema's benchmarks: runs Google Benchmark as usual (console output, and
// --benchmark_out=FILE for its JSON), then prints every crema figure beside the baseline measured
// in the same run, as a ratio. Benchmarks are paired by name: "crema/<case>" with
// "baseline/<case>". --crema_ratio_out=FILE writes the ratios as JSON too.

#include <benchmark/benchmark.h>
#include <fmt/core.h>
#include <fmt/os.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace crema::bench {

class ratio_reporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    // With --benchmark_repetitions the median stands for a case; otherwise its one run does.
    for (const auto& run : runs) {
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      const bool single = run.run_type == Run::RT_Iteration && run.iterations > 0;
      if (!median && !single) continue;
      const std::string name = run.run_name.str();
      const double nanoseconds = run.GetAdjustedRealTime() *
                                 benchmark::GetTimeUnitMultiplier(benchmark::kNanosecond) /
                                 benchmark::GetTimeUnitMultiplier(run.time_unit);
      if (name.starts_with("crema/")) record(crema_, name.substr(6), nanoseconds, median);
      if (name.starts_with("baseline/")) record(baseline_, name.substr(9), nanoseconds, median);
      record(all_, name, nanoseconds, median);
      for (const auto& [counter, value] : run.counters) {
        auto& entry = counters_[name + "#" + counter];
        if (median || !entry.median) entry = {value.value, median};
      }
    }
  }

  // A user counter of a benchmark by its full name ("crema/x", "consumer_cpu_ns"); 0 if none.
  [[nodiscard]] double counter(const std::string& name, const std::string& counter_name) const {
    const auto found = counters_.find(name + "#" + counter_name);
    return found == counters_.end() ? 0.0 : found->second.nanoseconds;
  }

  // The time of any benchmark by its full name ("reference/memcpy"), in nanoseconds per
  // iteration; 0 if it did not run.
  [[nodiscard]] double nanoseconds(const std::string& name) const {
    const auto found = all_.find(name);
    return found == all_.end() ? 0.0 : found->second.nanoseconds;
  }

  // Prints the ratio table; writes it as JSON to `json_path` unless empty. Returns the count.
  int finish(std::string_view title, const std::string& json_path) const {
    fmt::print(
        "\n{}: crema beside its baseline, same run (ratio = crema / baseline time; "
        "speedup = baseline / crema time)\n",
        title);
    fmt::print("{:<48} {:>14} {:>14} {:>8} {:>8}\n", "case", "crema ns", "baseline ns", "ratio",
               "speedup");
    std::string json = fmt::format("{{\"benchmark\": \"{}\", \"ratios\": [", title);
    int pairs = 0;
    for (const auto& [name, crema_figure] : crema_) {
      const auto baseline = baseline_.find(name);
      if (baseline == baseline_.end()) continue;
      const double crema_ns = crema_figure.nanoseconds;
      const double baseline_ns = baseline->second.nanoseconds;
      const double ratio = crema_ns / baseline_ns;
      fmt::print("{:<48} {:>14.2f} {:>14.2f} {:>8.3f} {:>8.2f}\n", name, crema_ns, baseline_ns,
                 ratio, 1.0 / ratio);
      json += fmt::format(
          "{}{{\"case\": \"{}\", \"crema_ns\": {}, \"baseline_ns\": {}, "
          "\"ratio\": {}}}",
          pairs == 0 ? "" : ", ", name, crema_ns, baseline_ns, ratio);
      ++pairs;
    }
    json += "]}\n";
    if (!json_path.empty()) {
      auto out = fmt::output_file(json_path);
      out.print("{}", json);
    }
    return pairs;
  }

 private:
  struct figure {
    double nanoseconds = 0;
    bool median = false;
  };
  static void record(std::map<std::string, figure>& figures, const std::string& name,
                     double nanoseconds, bool median) {
    auto& entry = figures[name];
    if (median || !entry.median) entry = {nanoseconds, median};
  }

  std::map<std::string, figure> crema_;
  std::map<std::string, figure> baseline_;
  std::map<std::string, figure> all_;
  std::map<std::string, figure> counters_;
};

// Runs the registered benchmarks and prints the ratios, then whatever `epilogue(reporter)`
// prints; returns the process exit code.
template <class Epilogue = void (*)(const ratio_reporter&)>
int run_with_ratios(
    int argc, char** argv, std::string_view title,
    Epilogue epilogue = [](const ratio_reporter&) {}) {
  std::string json_path;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    constexpr std::string_view flag = "--crema_ratio_out=";
    if (std::string_view(argv[i]).starts_with(flag)) {
      json_path = argv[i] + flag.size();
    } else {
      args.push_back(argv[i]);
    }
  }
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 1;
  // The JSON of --benchmark_out names the machine too (benchmarks/plots/draw.py prints it).
  benchmark::AddCustomContext("machine", machine_description());
  ratio_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  fmt::print("\nmachine: {} (cache sizes in the benchmark's header above)\n", cpu_model());
  const int pairs = reporter.finish(title, json_path);
  epilogue(reporter);
  return pairs > 0 ? 0 : 1;
}

}  // namespace crema::bench
