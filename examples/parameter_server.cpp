// The parameter server in a few lines: rank 0 serves, every other rank computes. The problem is a
// least-squares fit whose gradient for iteration i comes from the rows of batch i; diffs travel
// as the top 5% of coordinates, the rest owed to the next diff.
//   mpirun -np 4 parameter_server
#include <crema/collective/ps/mpi/parameter_server.hpp>

#include <fmt/core.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <vector>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  constexpr std::size_t count = 1000;
  const auto target = [](std::size_t j) { return std::sin(0.01f * static_cast<float>(j)); };
  std::vector<float> w(count, 0.0f);  // the parameters: the server's, or a client's copy

  crema::mpi::ps_options options;
  options.diffs = crema::compression::top_k(0.05);
  options.max_staleness = 4;  // older diffs are redone on fresh parameters

  if (rank == 0) {
    crema::mpi::parameter_server<float> server(
        MPI_COMM_WORLD, w, crema::mpi::sgd_momentum<float>(0.05f, 0.5f), options);
    const auto& stats = server.serve(1500);
    double error = 0.0;
    for (std::size_t j = 0; j < count; ++j) error += std::abs(w[j] - target(j));
    fmt::print("{} updates, mean error {:.4f}\n", stats.version, error / count);
    for (const auto& client : stats.clients) {
      fmt::print("rank {}: {} diffs applied, {} redone, {} KiB received\n", client.rank,
                 client.applied, client.refreshed, client.bytes_received / 1024);
    }
  } else {
    crema::mpi::ps_client<float> client(MPI_COMM_WORLD, w, options);
    std::vector<float> gradient(count);
    for (auto iteration = client.pull(); iteration; iteration = client.exchange(gradient)) {
      // This iteration's rows: every coordinate, seen through its batch's noise.
      for (std::size_t j = 0; j < count; ++j) {
        const float noise = 0.01f * std::sin(static_cast<float>(*iteration * count + j));
        gradient[j] = w[j] - target(j) + noise;
      }
    }
    fmt::print("rank {} sent {} KiB for {} diffs ({} KiB uncompressed)\n", rank,
               client.stats().bytes_sent / 1024, client.stats().pushes,
               client.stats().bytes_dense / 1024);
  }
  MPI_Finalize();
}
