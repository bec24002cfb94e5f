#pragma once

// A main for crema's benchmarks: runs Google Benchmark as usual (console output, and
// --benchmark_out=FILE for its JSON), then prints every crema figure beside the baseline measured
// in the same run, as a ratio. Benchmarks are paired by name: "crema/<case>" with
// "baseline/<case>". --crema_ratio_out=FILE writes the ratios as JSON too.

#include <benchmark/benchmark.h>
#include <fmt/core.h>
#include <fmt/os.h>

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
    for (const auto& run : runs) {
      if (run.run_type != Run::RT_Iteration || run.iterations == 0) continue;
      const std::string name = run.benchmark_name();
      const double nanoseconds = run.GetAdjustedRealTime() *
                                 benchmark::GetTimeUnitMultiplier(benchmark::kNanosecond) /
                                 benchmark::GetTimeUnitMultiplier(run.time_unit);
      if (name.starts_with("crema/")) crema_[name.substr(6)] = nanoseconds;
      if (name.starts_with("baseline/")) baseline_[name.substr(9)] = nanoseconds;
    }
  }

  // Prints the ratio table; writes it as JSON to `json_path` unless empty. Returns the count.
  int finish(std::string_view title, const std::string& json_path) const {
    fmt::print("\n{}: crema beside its baseline, same run (ratio = crema / baseline time)\n",
               title);
    fmt::print("{:<40} {:>14} {:>14} {:>8}\n", "case", "crema ns", "baseline ns", "ratio");
    std::string json = fmt::format("{{\"benchmark\": \"{}\", \"ratios\": [", title);
    int pairs = 0;
    for (const auto& [name, crema_ns] : crema_) {
      const auto baseline = baseline_.find(name);
      if (baseline == baseline_.end()) continue;
      const double ratio = crema_ns / baseline->second;
      fmt::print("{:<40} {:>14.2f} {:>14.2f} {:>8.3f}\n", name, crema_ns, baseline->second, ratio);
      json += fmt::format("{}{{\"case\": \"{}\", \"crema_ns\": {}, \"baseline_ns\": {}, "
                          "\"ratio\": {}}}",
                          pairs == 0 ? "" : ", ", name, crema_ns, baseline->second, ratio);
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
  std::map<std::string, double> crema_;
  std::map<std::string, double> baseline_;
};

// Runs the registered benchmarks and prints the ratios; returns the process exit code.
inline int run_with_ratios(int argc, char** argv, std::string_view title) {
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
  ratio_reporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return reporter.finish(title, json_path) > 0 ? 0 : 1;
}

}  // namespace crema::bench
