// crema-cuda-demo: crema-demo on GPUs. The same databases, model, schedule and options; each
// solver is a GPU (crema-demo's solvers on emulated devices become cuda_participants, as Caffe's
// P2PSync ran one solver per GPU): the pipeline's producers fill pinned CUDA device_batches and
// start their uploads on the solver's copy stream, the solver's kernels wait for them on its
// compute stream, and p2p_sync moves parameters and gradients between the GPUs with the CUDA
// peer-copy reducer, a layer at a time. With fewer GPUs than --participants, as many solvers as
// GPUs, each taking a larger batch so that the global batch stays the same. The test accuracy is
// measured on the host with the downloaded parameters, as crema-demo measures it.
//   crema-cuda-demo [options of crema-demo]  (--help lists them)
#include "demo/cuda_solver.cuh"
#include "demo/options.hpp"
#include "demo/train.hpp"

#include <crema/collective/cuda/cuda_p2p_reducer.cuh>
#include <crema/core/cuda/device.hpp>
#include <crema/crema.hpp>

#include <fmt/core.h>

#include <cuda_runtime_api.h>
#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>
#include <numeric>
#include <span>
#include <string_view>
#include <variant>
#include <vector>

int main(int argc, char** argv) {
  auto read = demo::read_command_line(argc, argv, "crema-cuda-demo");
  if (const int* status = std::get_if<int>(&read)) return *status;
  auto& options = std::get<demo::command_line>(read);
  demo::settings& s = options.train;
  try {
    const int gpus = crema::cuda::device_count();
    if (gpus == 0) {
      fmt::print(stderr, "crema-cuda-demo: no CUDA device (crema-demo runs without one)\n");
      return 3;
    }
    const std::size_t asked = s.participants;
    s.participants = std::min<std::size_t>(asked, static_cast<std::size_t>(gpus));
    s.batch = s.batch * asked / s.participants;  // the same global batch
    fmt::print(
        "crema {}.{}.{} cuda demo: a classifier of 10 shapes, {} solvers on {} GPUs ({} "
        "asked), {} images each a step\n",
        crema::version.major, crema::version.minor, crema::version.patch, s.participants, gpus,
        asked, s.batch);
    const demo::data_folder data(options, "crema-cuda-demo");
    const auto& folder = data.path();
    demo::make_datasets(folder, s);

    // One solver per GPU, paired into a tree by peer access; participant 0 is its root.
    std::vector<int> ids(s.participants);
    std::iota(ids.begin(), ids.end(), 0);
    const auto tree = crema::tree_topology::build(ids, [](int a, int b) {
      int can = 0;
      return a == b || (cudaDeviceCanAccessPeer(&can, a, b) == cudaSuccess && can != 0);
    });
    const demo::mlp model = demo::model_for(s);
    std::vector<std::unique_ptr<demo::cuda_participant>> solvers;
    for (const int id : ids) {
      solvers.push_back(std::make_unique<demo::cuda_participant>(id, model, s.batch));
      if (static_cast<std::size_t>(id) == tree.root()) {
        model.initialize(solvers.back()->host_parameters(), 1);
      }
    }
    std::vector<crema::device_span<float>> parameters;
    std::vector<crema::device_span<float>> gradients;
    for (auto& solver : solvers) {
      parameters.push_back(solver->device_parameters());
      gradients.push_back(solver->device_gradients());
    }
    crema::cuda::cuda_p2p_reducer<float> parameter_reducer(tree, parameters);
    crema::cuda::cuda_p2p_reducer<float> gradient_reducer(tree, gradients);
    crema::p2p_sync sync(parameter_reducer, gradient_reducer, tree.root(),
                         demo::sync_options(model));
    demo::print_model(model, s);

    const auto run = demo::train_on(folder / "train", sync, solvers, model, s, options.progress);
    fmt::print("trained in {:.1f} s on {} GPU(s)\npipeline: {}\n", run.seconds, s.participants,
               run.pipeline);

    const double accuracy =
        demo::test_accuracy(folder / "test", solvers[tree.root()]->trained_parameters(), model);
    return demo::report(options, accuracy, "crema-cuda-demo");
  } catch (const std::exception& e) {
    fmt::print(stderr, "crema-cuda-demo: {}\n", e.what());
    return 1;
  }
}
