#include "common/ratio_report.hpp"

#include <fmt/core.h>

int main(int argc, char** argv) {
  return crema::bench::run_with_ratios(
      argc, argv, "caffe_data_layer", [](const crema::bench::ratio_reporter& reporter) {
        fmt::print("\none pass of the database per iteration, same run:\n");
        for (const char* set : {"small", "large"}) {
          for (const int threads : {1, 2, 4}) {
            const auto name = fmt::format("data_layer/{}/threads:{}/real_time", set, threads);
            const double crema = reporter.nanoseconds("crema/" + name);
            const double base = reporter.nanoseconds("baseline/" + name);
            if (crema <= 0 || base <= 0) continue;
            fmt::print(
                "  data_layer {:<5}: the pipeline reaches {:.1f}% of the hand-written loop "
                "on {} thread{}",
                set, 100.0 * base / crema, threads, threads == 1 ? "" : "s");
            const double prefetching = reporter.nanoseconds(
                fmt::format("reference/prefetching_loop/{}/threads:{}/real_time", set, threads));
            if (prefetching > 0) {
              fmt::print(", {:.1f}% of the loop prefetching as crema does",
                         100.0 * prefetching / crema);
            }
            fmt::print("\n");
            const double bytes = reporter.nanoseconds("crema-bytes/" + name);
            if (bytes > 0) {
              fmt::print(
                  "  data_layer {:<5}: batches of bytes (crop and mirror alone) take {:.1f}% of "
                  "the float batches' time on {} thread{}\n",
                  set, 100.0 * bytes / crema, threads, threads == 1 ? "" : "s");
            }
          }
          const double crema =
              reporter.nanoseconds(fmt::format("crema/read_only/{}/real_time", set));
          const double base =
              reporter.nanoseconds(fmt::format("baseline/read_only/{}/real_time", set));
          if (crema <= 0 || base <= 0) continue;
          fmt::print("  read_only  {:<5}: the pipeline reaches {:.1f}% of a raw cursor scan\n", set,
                     100.0 * base / crema);
        }
      });
}
