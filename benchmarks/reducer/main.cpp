// Prints crema's allreduce beside the copy bound (the ratio table), then beside Open MPI's
// MPI_Allreduce when --mpi_results=FILE names the output of crema-bench-mpi-allreduce (see
// compare_with_mpi.sh, which runs both).
#include "common/ratio_report.hpp"
#include "reducer/shape.hpp"

#include <fmt/core.h>

#include <cmath>
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
        fmt::print(
            "\nbus bandwidth (GB/s) of crema's allreduce by placement of the buffers, the copy "
            "bound, Open MPI\n");
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
        // Per cell: every placement, the worst beside the page-aligned one, and against Open MPI
        // (whose own buffers are its business). The geometric mean of worst / Open MPI over the
        // cells is the figure to hold against the target.
        double log_sum = 0;
        int cells = 0;
        for (const long size : {16L, 64L}) {
          for (const long participants : {2L, 4L}) {
            const double bytes = static_cast<double>(size << 20);
            const double n = static_cast<double>(participants);
            const auto busbw = [&](const std::string& side, long placement) {
              const double ns = reporter.nanoseconds(
                  fmt::format("{}/allreduce/MiB:{}/participants:{}/placement:{}/real_time", side,
                              size, participants, placement));
              return ns > 0 ? bus_bandwidth(bytes, ns * 1e-9, n) * 1e-9 : 0.0;
            };
            const double aligned = busbw("crema", 0);
            if (aligned <= 0) continue;
            double worst = aligned;
            long worst_placement = 0;
            std::string each;
            for (long placement = 0; placement < crema::bench::reducer::placements; ++placement) {
              const double figure = busbw("crema", placement);
              each += fmt::format("{}{} {:.2f}", placement == 0 ? "" : ", ",
                                  crema::bench::reducer::placement_name(placement), figure);
              if (figure > 0 && figure < worst) {
                worst = figure;
                worst_placement = placement;
              }
            }
            std::string versus_mpi = "no Open MPI figure";
            for (const auto& [m, r, s] : mpi_figures) {
              if (m == size && r == participants) {
                const double mpi_bw = bus_bandwidth(bytes, s, n) * 1e-9;
                versus_mpi = fmt::format("Open MPI {:.2f}, worst / Open MPI = {:.2f}", mpi_bw,
                                         worst / mpi_bw);
                log_sum += std::log(worst / mpi_bw);
                ++cells;
              }
            }
            fmt::print(
                "{:>3} MiB x {}: {}\n           worst {:.2f} ({}) = {:.0f}% of page-aligned; "
                "copy bound (page-aligned) {:.2f}; {}\n",
                size, participants, each, worst,
                crema::bench::reducer::placement_name(worst_placement), 100.0 * worst / aligned,
                busbw("baseline", 0), versus_mpi);
          }
        }
        if (cells > 0) {
          fmt::print("geometric mean over {} cells of worst placement / Open MPI: {:.2f}\n", cells,
                     std::exp(log_sum / cells));
        }
      });
}
