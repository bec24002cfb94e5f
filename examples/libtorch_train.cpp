// A LibTorch training loop fed by crema: the C++ twin of examples/python/train.py. crema's
// epoch_loader reads a folder of JPEGs (one folder per class), crops, flips and normalises on its
// own threads into batch slots; each batch reaches the model as tensors made by torch::from_blob
// over the slot's memory, without a copy, and the slot goes back when the step is done.
//   libtorch_train DATA [--epochs N] [--threads T] [--expect ACCURACY]
// DATA holds train/ and test/, as examples/python/make_shapes.py writes them. Exits 1 when the
// test accuracy is below --expect.
#include <crema/io/image/image_batcher.hpp>
#include <crema/io/image/image_folder_source.hpp>
#include <crema/pipeline/epoch_loader.hpp>
#include <crema/pipeline/host_batch.hpp>

#include <torch/torch.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>

namespace {

constexpr float mean = 0.5F;
constexpr float deviation = 0.25F;

// The batches: float samples and int64 labels, as torch's losses take them.
using make_batch = crema::make_host_batch<float, std::int64_t>;
using batcher = crema::image_batcher<make_batch>;
using loader = crema::epoch_loader<crema::image_folder_source, batcher>;

// The model of train.py: two strided convolutions, then a linear layer.
torch::nn::Sequential make_model() {
  using namespace torch::nn;
  return Sequential(Conv2d(Conv2dOptions(3, 16, 5).stride(2).padding(2)), ReLU(),
                    Conv2d(Conv2dOptions(16, 32, 3).stride(2).padding(1)), ReLU(), Flatten(),
                    Linear(32 * 8 * 8, 10));
}

// The batch a lease holds, as tensors over its memory: valid while the lease lives.
std::pair<torch::Tensor, torch::Tensor> tensors_of(const loader::lease_type& lease) {
  auto& batch = *lease;
  const auto size = static_cast<std::int64_t>(lease.size());
  const crema::record_shape shape = batch.shape();
  torch::Tensor images = torch::from_blob(
      batch.data.data(),
      {size, static_cast<std::int64_t>(shape.channels), static_cast<std::int64_t>(shape.height),
       static_cast<std::int64_t>(shape.width)},
      torch::kFloat32);
  torch::Tensor labels = torch::from_blob(batch.labels.data(), {size}, torch::kInt64);
  return {images, labels};
}

loader make_loader(const std::filesystem::path& folder, crema::image_transform_options options,
                   std::size_t batch_size, std::size_t threads, bool shuffle) {
  options.mean = {mean, mean, mean};
  options.std = {deviation, deviation, deviation};
  crema::image_folder_source prototype(folder);
  if (shuffle) prototype.shuffle(1);
  return loader([prototype] { return prototype; },
                batcher(crema::image_transform(options), make_batch{}),
                {.batch_size = batch_size,
                 .threads = threads,
                 .seed = 1,
                 .last_batch = shuffle ? crema::partial_batch::drop : crema::partial_batch::keep});
}

std::string option(int argc, char** argv, std::string_view name, std::string fallback) {
  for (int i = 2; i + 1 < argc; ++i) {
    if (argv[i] == name) return argv[i + 1];
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) try {
  if (argc < 2) {
    fmt::print(stderr, "usage: libtorch_train DATA [--epochs N] [--threads T] [--expect A]\n");
    return 2;
  }
  const std::filesystem::path data = argv[1];
  const int epochs = std::stoi(option(argc, argv, "--epochs", "3"));
  const auto threads = static_cast<std::size_t>(std::stoul(option(argc, argv, "--threads", "2")));
  const double expect = std::stod(option(argc, argv, "--expect", "0"));
  torch::manual_seed(1);
  torch::set_num_threads(static_cast<int>(threads));

  loader train = make_loader(
      data / "train", {.geometry = crema::random_resized_crop{32, 32, 0.6, 1.0}, .mirror = true},
      64, threads, true);
  torch::nn::Sequential model = make_model();
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.02).momentum(0.9));
  const auto started = std::chrono::steady_clock::now();
  for (int epoch = 0; epoch < epochs; ++epoch) {
    train.start_epoch(static_cast<std::uint64_t>(epoch));
    double loss_sum = 0;
    std::int64_t samples = 0;
    while (const auto lease = train.next()) {  // the slot goes back at the end of the step
      const auto [images, labels] = tensors_of(lease);
      optimizer.zero_grad();
      const torch::Tensor loss =
          torch::nn::functional::cross_entropy(model->forward(images), labels);
      loss.backward();
      optimizer.step();
      loss_sum += loss.item<double>() * static_cast<double>(labels.size(0));
      samples += labels.size(0);
    }
    fmt::print("epoch {}: loss {:.3f} over {} samples\n", epoch,
               loss_sum / static_cast<double>(samples), samples);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  loader test = make_loader(data / "test", {.geometry = crema::resize_center_crop{32, 32, 32}}, 256,
                            threads, false);
  model->eval();
  torch::NoGradGuard no_grad;
  std::int64_t right = 0;
  std::int64_t total = 0;
  while (const auto lease = test.next()) {
    const auto [images, labels] = tensors_of(lease);
    right += model->forward(images).argmax(1).eq(labels).sum().item<std::int64_t>();
    total += labels.size(0);
  }
  const double accuracy = static_cast<double>(right) / static_cast<double>(total);
  fmt::print("trained in {:.1f} s; test accuracy {:.3f}\n", seconds, accuracy);
  return accuracy >= expect ? 0 : 1;
} catch (const std::exception& error) {
  fmt::print(stderr, "libtorch_train: {}\n", error.what());
  return 1;
}
