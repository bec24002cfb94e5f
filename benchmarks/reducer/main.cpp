// Prints crema's allreduce beside the copy bound (the ratio table), then beside Open MPI's
// MPI_Allreduce when --mpi_results=FILE names the output of crema-bench-mpi-allreduce (see
// compare_with_mpi.sh, which runs both).
#include "common/ratio_report.hpp"
#include "reducer/shape.hpp"

#include <fmt/core.h>

#include <fstream>
#include <string>
#include <string_view>

int main(int argc, char** argv) {
  std::string mpi_results;
  for (int i = 1; i < argc; ++i) {
    constexpr std::string_view flag = "--mpi_results=";
    if (std::string_view(argv[i]).starts_with(flag)) {
      mpi_results = argv[i] + flag.size();
      for (int j = i; j + 1 < argc; ++j) argv[j] = argv[j + 1];
      --argc;
      break;
    }
  }
  return crema::bench::run_with_ratios(
      argc, argv, "reducer", [&](const crema::bench::ratio_reporter& reporter) {
        using crema::bench::reducer::bus_bandwidth;
        fmt::print("\nbus bandwidth (GB/s): crema allreduce, the copy bound, Open MPI\n");
        std::ifstream mpi(mpi_results);
        long mib = 0;
        long ranks = 0;
        double seconds = 0;
        std::string line;
        // Lines of the MPI program: "mpi_allreduce MiB=<m> ranks=<r> seconds=<t>".
        std::vector<std::tuple<long, long, double>> mpi_figures;
        while (std::getline(mpi, line)) {
          if (std::sscanf(line.c_str(), "mpi_allreduce MiB=%ld ranks=%ld seconds=%lf", &mib, &ranks,
                          &seconds) == 3) {
            mpi_figures.emplace_back(mib, ranks, seconds);
          }
        }
        for (const long size : {16L, 64L}) {
          for (const long participants : {2L, 4L}) {
            const auto name =
                fmt::format("allreduce/MiB:{}/participants:{}/real_time", size, participants);
            const double bytes = static_cast<double>(size << 20);
            const double n = static_cast<double>(participants);
            const double crema_ns = reporter.nanoseconds("crema/" + name);
            const double bound_ns = reporter.nanoseconds("baseline/" + name);
            if (crema_ns <= 0 || bound_ns <= 0) continue;
            const double crema_bw = bus_bandwidth(bytes, crema_ns * 1e-9, n) * 1e-9;
            const double bound_bw = bus_bandwidth(bytes, bound_ns * 1e-9, n) * 1e-9;
            std::string versus_mpi = "(no MPI figure)";
            for (const auto& [m, r, s] : mpi_figures) {
              if (m == size && r == participants) {
                const double mpi_bw = bus_bandwidth(bytes, s, n) * 1e-9;
                versus_mpi = fmt::format("Open MPI {:.2f}, crema / Open MPI = {:.2f}", mpi_bw,
                                         crema_bw / mpi_bw);
              }
            }
            fmt::print("{:>3} MiB x {}: crema {:.2f}, bound {:.2f} ({:.0f}% of bound), {}\n", size,
                       participants, crema_bw, bound_bw, 100.0 * crema_bw / bound_bw, versus_mpi);
          }
        }
      });
}
