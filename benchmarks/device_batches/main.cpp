#include "common/ratio_report.hpp"
#include "device_batches/shape.hpp"

#include <fmt/core.h>

int main(int argc, char** argv) {
  return crema::bench::run_with_ratios(
      argc, argv, "device_batches", [](const crema::bench::ratio_reporter& reporter) {
        fmt::print(
            "\nconsumer thread CPU time per batch outside its training step (pull, collate, "
            "upload, release):\n");
        for (const long step : {0L, 200L}) {
          const std::string name = fmt::format("device_batches/step_us:{}/real_time", step);
          const double crema_ns = reporter.counter("crema/" + name, "consumer_cpu_ns");
          const double baseline_ns = reporter.counter("baseline/" + name, "consumer_cpu_ns");
          if (crema_ns <= 0 || baseline_ns <= 0) continue;
          fmt::print("  step {:>3} us: crema {:>9.0f} ns, baseline {:>9.0f} ns, ratio {:.3f}\n",
                     step, crema_ns, baseline_ns, crema_ns / baseline_ns);
        }
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
