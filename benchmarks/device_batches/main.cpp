#include "common/ratio_report.hpp"
#include "device_batches/consumers.hpp"

#include <fmt/core.h>

int main(int argc, char** argv) {
  return crema::bench::run_with_ratios(
      argc, argv, "device_batches", [](const crema::bench::ratio_reporter& reporter) {
        namespace feeds = crema::bench::device_batches;
        feeds::print_consumer_ratios(reporter, {"crema"}, "device_batches");
        const double floor_ns =
            reporter.counter("floor/blocking_wait/real_time", "consumer_cpu_ns");
        if (floor_ns > 0) {
          fmt::print(
              "  floor: a consumer that waits for each batch pays one sleep and wake-up, {:.0f} ns "
              "here (a semaphore posted every 25 us, same run); where the step is 0 us the "
              "consumer waits for every batch\n",
              floor_ns);
        }
        fmt::print(
            "end to end: batches per second are the inverse of the times above (ratio < 1: crema "
            "faster)\n");
      });
}
