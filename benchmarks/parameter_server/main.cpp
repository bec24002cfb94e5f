// The parameter server's updates per second, one server and the other ranks its clients, beside
// a synchronous step of MPI's own collectives on the same ranks in the same job: every rank's
// gradient summed at rank 0 by MPI_Reduce, the same update rule applied there, the parameters
// sent back by MPI_Bcast. Clients compute nothing (a fixed gradient), so the figure is the
// machinery's: messages, compression, the update. Rank 0 prints one line per case, and JSON with
// --json=FILE.
//   mpirun -np 4 crema-bench-parameter-server [--sizes=1,16] [--updates=N] [--json=FILE]
#include <crema/collective/ps/mpi/parameter_server.hpp>

#include "common/machine.hpp"

#include <fmt/core.h>
#include <fmt/os.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

constexpr int repetitions = 5;

// The median over the repetitions of rank 0's updates per second, after a warm-up.
template <class Run>
double median_rate(Run&& run) {
  std::vector<double> rates;
  for (int repeat = 0; repeat <= repetitions; ++repeat) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    const double updates = run();
    double rate = updates / (MPI_Wtime() - start);
    MPI_Bcast(&rate, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    if (repeat > 0) rates.push_back(rate);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

std::vector<float> random_gradient(std::size_t count, int rank) {
  std::mt19937 generator(static_cast<std::uint32_t>(rank + 1));
  std::normal_distribution<float> normal(0.0f, 1e-3f);
  std::vector<float> gradient(count);
  for (auto& value : gradient) value = normal(generator);
  return gradient;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  std::vector<std::size_t> sizes{1, 16};  // millions of parameters
  std::string json_path;
  std::uint64_t fixed_updates = 0;  // 0: a few seconds' worth per case
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.starts_with("--json=")) json_path = std::string(arg.substr(7));
    if (arg.starts_with("--updates=")) fixed_updates = std::stoull(std::string(arg.substr(10)));
    if (arg.starts_with("--sizes=")) {
      sizes.clear();
      std::stringstream list{std::string(arg.substr(8))};
      for (std::string item; std::getline(list, item, ',');) sizes.push_back(std::stoul(item));
    }
  }
  int rank = 0;
  int ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  if (ranks < 2) {
    if (rank == 0) fmt::print(stderr, "crema-bench-parameter-server: run it under mpirun -np 4\n");
    MPI_Finalize();
    return 2;
  }
  if (rank == 0) {
    fmt::print("machine: {}; 1 server and {} clients\n", crema::bench::machine_description(),
               ranks - 1);
  }
  std::string json = fmt::format(
      "{{\"benchmark\": \"parameter_server\", \"machine\": \"{}\", \"clients\": {}, \"cases\": [",
      crema::bench::machine_description(), ranks - 1);
  bool first_case = true;
  for (const std::size_t millions : sizes) {
    const std::size_t count = millions << 20;
    const auto gradient = random_gradient(count, rank);
    std::vector<float> parameters(count, 0.0f);
    // Each case serves a few seconds' worth on a small machine.
    const std::uint64_t updates =
        fixed_updates > 0 ? fixed_updates : std::max<std::uint64_t>(8, 96 / millions);

    // The synchronous step of MPI's own collectives: every rank's gradient summed at rank 0 (the
    // server's own is zero), averaged over the clients, the rule applied, the parameters sent.
    std::vector<float> sum(rank == 0 ? count : 0);
    std::vector<float> zero(rank == 0 ? count : 0, 0.0f);
    crema::mpi::sgd_momentum<float> baseline_rule;
    const double baseline = median_rate([&] {
      for (std::uint64_t step = 0; step < updates; ++step) {
        MPI_Reduce(rank == 0 ? zero.data() : gradient.data(), sum.data(), static_cast<int>(count),
                   MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
        if (rank == 0) {
          const float mean = 1.0f / static_cast<float>(ranks - 1);
          for (auto& value : sum) value *= mean;
          baseline_rule(parameters, sum, step);
        }
        MPI_Bcast(parameters.data(), static_cast<int>(count), MPI_FLOAT, 0, MPI_COMM_WORLD);
      }
      return static_cast<double>(updates);
    });
    if (rank == 0) {
      fmt::print("{:>2} M parameters, MPI_Reduce + MPI_Bcast step {:>28} {:9.2f} updates/s\n",
                 millions, "", baseline);
      json += fmt::format(
          "{}{{\"million_parameters\": {}, \"case\": \"MPI_Reduce + MPI_Bcast\", "
          "\"updates_per_second\": {}}}",
          first_case ? "" : ", ", millions, baseline);
      first_case = false;
    }

    for (const auto& [name, how] : {std::pair{"uncompressed", crema::compression{}},
                                    std::pair{"top-k 1%", crema::compression::top_k(0.01)},
                                    std::pair{"fp16", crema::compression{}.with_fp16()}}) {
      crema::mpi::ps_options options;
      options.diffs = how;
      double bytes_sent = 0;
      double bytes_dense = 0;
      const double rate = median_rate([&] {
        if (rank == 0) {
          crema::mpi::parameter_server<float> server(MPI_COMM_WORLD, parameters, {}, options);
          // As many iterations as clients per update: the updates the baseline made.
          return static_cast<double>(
              server.serve(updates * static_cast<std::uint64_t>(ranks - 1)).version);
        }
        crema::mpi::ps_client<float> client(MPI_COMM_WORLD, parameters, options);
        for (auto iteration = client.pull(); iteration; iteration = client.exchange(gradient)) {
        }
        bytes_sent = static_cast<double>(client.stats().bytes_sent);
        bytes_dense = static_cast<double>(client.stats().bytes_dense);
        return 0.0;
      });
      // One client's share of the bytes, the last repetition's.
      double share[2] = {bytes_sent, bytes_dense};
      if (rank == 1) MPI_Send(share, 2, MPI_DOUBLE, 0, 0, MPI_COMM_WORLD);
      if (rank == 0) MPI_Recv(share, 2, MPI_DOUBLE, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      if (rank == 0) {
        const double sent_share = share[1] > 0 ? share[0] / share[1] : 0.0;
        fmt::print(
            "{:>2} M parameters, parameter_server {:<14} bytes {:5.1f}% {:9.2f} updates/s   "
            "ratio = crema / baseline = {:.3f}\n",
            millions, name, 100.0 * sent_share, rate, rate / baseline);
        json += fmt::format(
            ", {{\"million_parameters\": {}, \"case\": \"parameter_server {}\", "
            "\"updates_per_second\": {}, \"bytes_sent_share\": {}, \"ratio\": {}}}",
            millions, name, rate, sent_share, rate / baseline);
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
