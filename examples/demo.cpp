// crema-demo: the main job. Makes a Caffe LMDB of ten classes of shapes, then trains a
// classifier on it data-parallel, as Caffe's P2PSync trained one solver per GPU: a
// double_buffered_pipeline reads the database and its producers decode, crop, mirror, subtract
// the mean and scale into device batches on each solver's device; the solvers keep their
// parameters and gradients in synced_buffers on their devices, and p2p_sync broadcasts the
// parameters and averages the gradients, a layer at a time. Prints a progress bar, then the
// accuracy on the test database.
//
// Runs on any machine: each solver's device is crema's emulated device (host memory, counted
// transfers), its kernels plain loops. crema-mpi-train runs the same training across MPI ranks.
//   crema-demo [--participants=N] [--steps=N] [--data=DIR] ... (--help lists them)

#include "demo/options.hpp"
#include "demo/train.hpp"

#include <crema/crema.hpp>

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <numeric>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

int main(int argc, char** argv) {
  auto read = demo::read_command_line(argc, argv, "crema-demo");
  if (const int* status = std::get_if<int>(&read)) return *status;
  auto& options = std::get<demo::command_line>(read);
  const demo::settings& s = options.train;
  try {
    fmt::print("crema {}.{}.{} demo: a classifier of 10 shapes, {} solvers on emulated devices\n",
               crema::version.major, crema::version.minor, crema::version.patch, s.participants);
    const demo::data_folder data(options, "crema-demo");
    const auto& folder = data.path();
    const auto started = std::chrono::steady_clock::now();
    demo::make_datasets(folder, s);
    fmt::print("datasets: {} training and {} test images of 3 x 32 x 32 ({}) in {} ({:.1f} s)\n",
               s.train_records, s.test_records, fmt::join(demo::class_names, ", "), folder.string(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());

    // The solvers, paired into a tree as Caffe paired GPUs; participant 0 is its root.
    std::vector<int> ids(s.participants);
    std::iota(ids.begin(), ids.end(), 0);
    const auto tree = crema::tree_topology::build(ids, [](int, int) { return true; });
    const demo::mlp model = demo::model_for(s);
    auto solvers = demo::make_participants(model, s.participants, 0, tree.root());
    crema::host_p2p_sync<float> sync(
        tree, demo::device_spans(solvers, &demo::participant::device_parameters),
        demo::device_spans(solvers, &demo::participant::device_gradients),
        demo::sync_options(model));
    demo::print_model(model, s);

    const auto run = demo::train_on(folder / "train", sync, solvers, model, s, options.progress);

    const auto& root = *solvers[tree.root()];
    const double accuracy = demo::test_accuracy(folder / "test", root.trained_parameters(), model);
    const auto transfers = root.device().stats();
    fmt::print("trained in {:.1f} s; the root's device: {} uploads, {} download\n", run.seconds,
               transfers.uploads, transfers.downloads);
    fmt::print("pipeline: {}\n", run.pipeline);
    return demo::report(options, accuracy, "crema-demo");
  } catch (const std::exception& e) {
    fmt::print(stderr, "crema-demo: {}\n", e.what());
    return 1;
  }
}
