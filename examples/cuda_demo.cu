// crema-cuda-demo: crema-demo on GPUs. The same databases, model, schedule and options; each
// solver is a GPU (crema-demo's solvers on emulated devices become cuda_participants, as Caffe's
// P2PSync ran one solver per GPU): the pipeline's producers fill pinned CUDA device_batches and
// start their uploads on the solver's copy stream, the solver's kernels wait for them on its
// compute stream, and p2p_sync moves parameters and gradients between the GPUs with the CUDA
// peer-copy reducer, a layer at a time. With fewer GPUs than --participants, as many solvers as
// GPUs, each taking a larger batch so that the global batch stays the same. The test accuracy is
// measured on the host with the downloaded parameters, as crema-demo measures it.
// With --input=jpeg (where crema::nvjpeg is built), the training images are also written as JPEG
// files, a folder per class, and read by nvjpeg_batcher: each batch decoded by nvJPEG on its
// solver's GPU and centre-cropped, mirrored and normalised there by crema's kernels.
//   crema-cuda-demo [--input=lmdb|jpeg] [options of crema-demo]  (--help lists them)
#include "demo/cuda_solver.cuh"
#include "demo/options.hpp"
#include "demo/train.hpp"

#include <crema/collective/cuda/cuda_p2p_reducer.cuh>
#include <crema/core/cuda/device.hpp>
#include <crema/crema.hpp>
#if defined(CREMA_DEMO_NVJPEG)
#include <crema/io/image/image_codec.hpp>
#include <crema/io/image/image_folder_source.hpp>
#include <crema/io/nvjpeg/nvjpeg_batcher.cuh>
#endif

#include <fmt/core.h>

#include <cuda_runtime_api.h>
#include <algorithm>
#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace {

// --input=jpeg or --input=lmdb, taken out of the command line; @return whether JPEG was asked.
bool jpeg_input(int& argc, char** argv) {
  bool jpeg = false;
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg(argv[i]);
    if (arg == "--input=jpeg" || arg == "--input=lmdb") {
      jpeg = arg == "--input=jpeg";
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  return jpeg;
}

#if defined(CREMA_DEMO_NVJPEG)
// The training images of the LMDB (the same draws) as JPEGs of quality 95 in folder/classK/.
void write_shape_jpegs(const std::filesystem::path& folder, const demo::settings& s) {
  const auto stamp = folder / "made-by-crema-cuda-demo";
  const std::string made = fmt::format("shapes: {} train\n", s.train_records);
  if (demo::stamped(stamp, made)) return;
  std::filesystem::remove_all(folder);
  std::vector<std::byte> jpeg;
  demo::for_each_shape(s.train_records, 1, [&](int r, int label, std::span<const std::byte> image) {
    const auto view =
        crema::image_view<std::uint8_t>::planar(reinterpret_cast<const std::uint8_t*>(image.data()),
                                                demo::channels, demo::side, demo::side);
    jpeg.clear();
    crema::encode_jpeg(view, 95, jpeg, crema::channel_order::rgb);
    const auto file = folder / fmt::format("class{}", label) / fmt::format("{:08}.jpg", r);
    std::filesystem::create_directories(file.parent_path());
    std::ofstream(file, std::ios::binary)
        .write(reinterpret_cast<const char*>(jpeg.data()),
               static_cast<std::streamsize>(jpeg.size()));
  });
  std::ofstream(stamp) << made;
}

// Caffe's centre crop 28, mirror, (x - 128) / 64 of the LMDB path, as an image_transform: the
// short side "resized" to 32 (as it is), the centre 28 x 28, ((x / 255) - 128 / 255) / (64 / 255).
crema::image_transform_options jpeg_transform() {
  constexpr float mean = 128.0F / 255.0F;
  constexpr float std = 64.0F / 255.0F;
  return {.geometry = crema::resize_center_crop{demo::side, demo::crop, demo::crop},
          .mirror = true,
          .mean = {mean, mean, mean},
          .std = {std, std, std}};
}

// Trains on the JPEG folder through nvjpeg_batcher, each consumer's batches on its solver's GPU.
template <class Sync, class Participant>
demo::training_run train_on_jpegs(const std::filesystem::path& folder, Sync& sync,
                                  std::vector<std::unique_ptr<Participant>>& solvers,
                                  const std::vector<int>& devices, const demo::mlp& model,
                                  const demo::settings& s, demo::progress_style style) {
  crema::image_folder_source source(folder);
  source.shuffle(s.seed);
  crema::double_buffered_pipeline pipe{
      std::move(source), crema::cuda::nvjpeg_batcher<float>(jpeg_transform(), {.devices = devices}),
      demo::pipeline_options_for(s, solvers.size())};
  demo::progress_bar bar(s.steps, solvers.size() * s.batch, style);
  demo::train(sync, pipe, solvers, 0, model, s, &bar);
  pipe.stop();
  return {bar.seconds(), pipe.stats()};
}
#endif

}  // namespace

int main(int argc, char** argv) {
  const bool jpeg = jpeg_input(argc, argv);
#if !defined(CREMA_DEMO_NVJPEG)
  if (jpeg) {
    fmt::print(stderr, "crema-cuda-demo: --input=jpeg needs crema::nvjpeg, not built here\n");
    return 2;
  }
#endif
  auto read = demo::read_command_line(argc, argv, "crema-cuda-demo");
  if (argc > 1 && std::string_view(argv[1]) == "--help") {
    fmt::print(
        "  --input=lmdb|jpeg  train from the LMDB (decoded on the CPU) or from JPEG files "
        "decoded\n                    by nvJPEG on the GPUs (default lmdb)\n");
  }
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

#if defined(CREMA_DEMO_NVJPEG)
    if (jpeg) write_shape_jpegs(folder / "train-jpeg", s);
    const auto run =
        jpeg ? train_on_jpegs(folder / "train-jpeg", sync, solvers, ids, model, s, options.progress)
             : demo::train_on(folder / "train", sync, solvers, model, s, options.progress);
#else
    const auto run = demo::train_on(folder / "train", sync, solvers, model, s, options.progress);
#endif
    fmt::print("training input: {}\n",
               jpeg ? "JPEG files decoded by nvJPEG on the GPUs" : "LMDB, decoded on the CPU");
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
