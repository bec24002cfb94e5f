// crema's MPI reducer beside MPI's own MPI_Allreduce, on the same buffers and ranks, in one job:
// with one participant per rank the wrapper must cost nothing; with several per rank (the
// hierarchical path), the figure to compare is flat MPI over as many ranks (run.sh runs both).
// Rank 0 prints one line per case, and JSON with --json=FILE.
//   mpirun -np <ranks> crema-bench-mpi-reducer [--local=<participants per rank>] [--json=FILE]
#include <crema/collective/mpi/mpi_reducer.hpp>

#include <fmt/core.h>
#include <fmt/os.h>
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr int repetitions = 7;

// The slowest rank's time of `run()`, median over the repetitions after a warm-up.
template <class Run>
double median_seconds(Run&& run) {
  std::vector<double> times;
  for (int repeat = 0; repeat <= repetitions; ++repeat) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    run();
    const double took = MPI_Wtime() - start;
    double slowest = 0;
    MPI_Allreduce(&took, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (repeat > 0) times.push_back(slowest);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double bus_bandwidth(double bytes, double seconds, double participants) {
  return bytes / seconds * 2.0 * (participants - 1.0) / participants * 1e-9;
}

std::string first_line_of(const char* path, std::string_view prefix) {
  std::ifstream file(path);
  std::string line;
  while (std::getline(file, line)) {
    if (line.rfind(prefix, 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

std::string caches() {
  std::string text;
  for (int index = 0; index < 8; ++index) {
    std::ifstream level(fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/level", index));
    std::ifstream type(fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/type", index));
    std::ifstream size(fmt::format("/sys/devices/system/cpu/cpu0/cache/index{}/size", index));
    std::string l, t, s;
    if (!(level >> l) || !(type >> t) || !(size >> s)) break;
    if (t == "Instruction") continue;
    text += fmt::format("{}L{} {}", text.empty() ? "" : ", ", l, s);
  }
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  std::size_t local = 1;
  std::string json_path;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with("--local=")) local = std::stoul(std::string(arg.substr(8)));
    if (arg.starts_with("--json=")) json_path = std::string(arg.substr(7));
  }
  int rank = 0;
  int ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  const double participants = static_cast<double>(ranks) * static_cast<double>(local);
  if (rank == 0) {
    fmt::print("machine: {} ({}); {} ranks x {} participants each\n",
               first_line_of("/proc/cpuinfo", "model name"), caches(), ranks, local);
  }
  std::string json = "{\"benchmark\": \"mpi_reducer\", \"cases\": [";
  bool first_case = true;
  std::vector<int> ids(local);
  std::iota(ids.begin(), ids.end(), 0);
  const auto tree = crema::tree_topology::build(ids, [](int, int) { return true; });
  for (const long mib : {16L, 64L}) {
    const std::size_t elements = static_cast<std::size_t>(mib << 20) / sizeof(float);
    std::vector<std::vector<float>> buffers(local, std::vector<float>(elements, 1.0f));
    std::vector<std::span<float>> spans(buffers.begin(), buffers.end());
    const double bytes = static_cast<double>(mib << 20);
    const auto report = [&](const char* what, double seconds) {
      const double busbw = bus_bandwidth(bytes, seconds, participants);
      if (rank == 0) {
        fmt::print("{:>3} MiB x {} participants, {:<28} {:8.2f} ms  busbw {:6.2f} GB/s\n", mib,
                   participants, what, seconds * 1e3, busbw);
        json += fmt::format(
            "{}{{\"MiB\": {}, \"ranks\": {}, \"local\": {}, \"case\": \"{}\", \"seconds\": {}, "
            "\"busbw_GBps\": {}}}",
            first_case ? "" : ", ", mib, ranks, local, what, seconds, busbw);
        first_case = false;
      }
      return busbw;
    };
    double mpi = 0;
    if (local == 1) {
      mpi = report("MPI_Allreduce", median_seconds([&] {
                     MPI_Allreduce(MPI_IN_PLACE, buffers[0].data(), static_cast<int>(elements),
                                   MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
                   }));
    }
    for (const auto across :
         {crema::mpi::across_ranks::allreduce, crema::mpi::across_ranks::tree}) {
      crema::mpi::mpi_reducer<float> reducer(MPI_COMM_WORLD, tree, spans, {.across = across});
      const bool via_mpi = across == crema::mpi::across_ranks::allreduce;
      const double crema =
          report(via_mpi ? "crema, MPI_Allreduce across" : "crema, crema's tree across",
                 median_seconds([&] { reducer.allreduce(); }));
      if (mpi > 0 && rank == 0) {
        fmt::print("{:>3} MiB: crema ({}) / MPI_Allreduce = {:.3f}\n", mib,
                   via_mpi ? "MPI_Allreduce" : "tree", crema / mpi);
      }
    }
  }
  json += "]}\n";
  if (rank == 0 && !json_path.empty()) {
    auto out = fmt::output_file(json_path);
    out.print("{}", json);
  }
  MPI_Finalize();
}
