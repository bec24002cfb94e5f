#include "common/ratio_report.hpp"

#include <fmt/core.h>

int main(int argc, char** argv) {
  return crema::bench::run_with_ratios(
      argc, argv, "caffe_data_layer", [](const crema::bench::ratio_reporter& reporter) {
        fmt::print("\nsamples per second (one pass of the database per iteration):\n");
        for (const char* set : {"small", "large"}) {
          for (const char* kind : {"data_layer", "read_only"}) {
            const double crema =
                reporter.nanoseconds(fmt::format("crema/{}/{}/real_time", kind, set));
            const double base =
                reporter.nanoseconds(fmt::format("baseline/{}/{}/real_time", kind, set));
            if (crema <= 0 || base <= 0) continue;
            fmt::print("  {:<10} {:<5}: crema reaches {:.1f}% of the {} (same run)\n", kind, set,
                       100.0 * base / crema,
                       kind == std::string_view("data_layer") ? "hand-written loop on 2 threads"
                                                              : "raw cursor scan");
          }
        }
      });
}
