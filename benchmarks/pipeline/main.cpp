#include "common/ratio_report.hpp"
#include "pipeline/shape.hpp"

#include <fmt/core.h>

int main(int argc, char** argv) {
  using namespace crema::bench::whole_pipeline;
  return crema::bench::run_with_ratios(
      argc, argv, "pipeline", [](const crema::bench::ratio_reporter& reporter) {
        const double memcpy_ns = reporter.nanoseconds("reference/memcpy_64MiB/real_time");
        if (memcpy_ns <= 0) return;
        const double memcpy_gbs = static_cast<double>(source_bytes) / memcpy_ns;
        fmt::print("\nmemcpy on 64 MiB buffers: {:.2f} GB/s\n", memcpy_gbs);
        for (const long producers : {1L, 2L, 8L}) {
          const double ns = reporter.nanoseconds(
              fmt::format("crema/pipeline/payload:3072/producers:{}/real_time", producers));
          if (ns <= 0) continue;
          const double gbs = static_cast<double>(batch_size * 3072) / ns;
          fmt::print(
              "pipeline, 3,072-byte records, {} producer(s): {:.2f} GB/s = {:.0f}% of "
              "memcpy\n",
              producers, gbs, 100.0 * gbs / memcpy_gbs);
        }
      });
}
