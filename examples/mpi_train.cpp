// crema-mpi-train: crema-demo's training across the ranks of an MPI job, through the MPI reducer.
// Each rank runs participants / ranks solvers on emulated devices, fed by its own pipeline over
// its shard of the training database (rank r reads the records r, r + ranks, ... of each pass's
// permutation); p2p_sync over two mpi_reducers broadcasts the root's parameters (participant 0,
// on rank 0) and averages every solver's gradients across ranks, a layer at a time. Rank 0 draws
// the progress bar and tests the trained parameters.
//   mpirun -np 2 crema-mpi-train [--participants=N] [--steps=N] ... (crema-demo's options)
// Each rank writes the databases (the same bytes) into a temporary folder of its own, so the
// ranks need no shared file system; with --data=DIR, rank 0 writes them there once and the
// others read them (DIR must then be shared).

#include "demo/options.hpp"
#include "demo/train.hpp"

#include <crema/collective/mpi/mpi_reducer.hpp>
#include <crema/crema.hpp>

#include <fmt/core.h>
#include <mpi.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <numeric>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace {

int run(const demo::command_line& options, int rank, int ranks) {
  const demo::settings& s = options.train;
  if (s.participants % static_cast<std::size_t>(ranks) != 0) {
    if (rank == 0) {
      fmt::print(stderr, "crema-mpi-train: --participants={} is not a multiple of the {} ranks\n",
                 s.participants, ranks);
    }
    return 2;
  }
  const std::size_t local = s.participants / static_cast<std::size_t>(ranks);
  if (rank == 0) {
    fmt::print("crema-mpi-train: a classifier of 10 shapes, {} solvers on {} ranks of {} each\n",
               s.participants, ranks, local);
  }
  // The databases: this rank's own copy, or rank 0's in --data.
  const demo::data_folder data(options, fmt::format("crema-mpi-train-rank{}", rank));
  const auto& folder = data.path();
  if (!options.data || rank == 0) demo::make_datasets(folder, s);
  if (options.data) MPI_Barrier(MPI_COMM_WORLD);

  // Global participant g is local solver g % local of rank g / local; 0 is the root.
  std::vector<int> ids(local);
  std::iota(ids.begin(), ids.end(), 0);
  const auto local_tree = crema::tree_topology::build(ids, [](int, int) { return true; });
  const std::size_t first = static_cast<std::size_t>(rank) * local;
  const demo::mlp model = demo::model_for(s);
  auto solvers = demo::make_participants(model, local, first, 0);
  crema::mpi::mpi_reducer<float> parameter_sync(
      MPI_COMM_WORLD, local_tree,
      demo::device_spans(solvers, &demo::participant::device_parameters));
  crema::mpi::mpi_reducer<float> gradient_sync(
      MPI_COMM_WORLD, local_tree,
      demo::device_spans(solvers, &demo::participant::device_gradients));
  if (rank == 0) demo::print_model(model, s);

  crema::lmdb_source train(folder / "train", {.permute = true, .seed = s.seed});
  train.shard(static_cast<std::size_t>(rank), static_cast<std::size_t>(ranks));
  crema::double_buffered_pipeline pipe{std::move(train), demo::batcher_for(solvers),
                                       demo::pipeline_options_for(s, local)};
  std::optional<demo::progress_bar> bar;
  // mpirun hands the ranks a pseudo-terminal whatever its own output is: lines unless asked.
  if (rank == 0) {
    bar.emplace(s.steps, s.participants * s.batch,
                options.progress == demo::progress_style::automatic ? demo::progress_style::lines
                                                                    : options.progress);
  }
  {
    crema::p2p_sync<crema::mpi::mpi_reducer<float>> sync(parameter_sync, gradient_sync, 0,
                                                         demo::sync_options(model));
    demo::train(sync, pipe, solvers, first, model, s, bar ? &*bar : nullptr);
  }
  pipe.stop();

  int status = 0;
  if (rank == 0) {
    const double seconds = bar->seconds();
    const double accuracy =
        demo::test_accuracy(folder / "test", solvers[0]->trained_parameters(), model);
    fmt::print("trained in {:.1f} s; rank 0's pipeline: {}\n", seconds, pipe.stats());
    status = demo::report(options, accuracy, "crema-mpi-train");
  }
  MPI_Bcast(&status, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  int rank = 0;
  int ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  int status = 0;
  try {
    if (argc > 1 && std::string_view(argv[1]) == "--help") {
      if (rank == 0) fmt::print("{}", demo::usage);
    } else {
      status = run(demo::parse(std::span(argv, static_cast<std::size_t>(argc))), rank, ranks);
    }
  } catch (const std::invalid_argument& e) {
    if (rank == 0) fmt::print(stderr, "crema-mpi-train: {}\n", e.what());
    status = 2;
  } catch (const std::exception& e) {
    // A failure on one rank: the others' collectives time out and name it; end the job now.
    fmt::print(stderr, "crema-mpi-train: rank {}: {}\n", rank, e.what());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return status;
}
