// ImageNet-style input in crema: a folder of JPEGs (one folder per class), read by pipelines that
// decode only the window each sample needs. Training: RandomResizedCrop(224), a random flip and
// Normalize, shuffled and sharded; evaluation: Resize(256) + CenterCrop(224), in order, once.
//   imagenet_input ROOT [RANK WORLD]
#include <crema/io/image/image_batcher.hpp>
#include <crema/io/image/image_folder_source.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/host_batch.hpp>

#include <fmt/core.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc != 2 && argc != 4) {
    fmt::print(stderr, "usage: imagenet_input ROOT [RANK WORLD]\n");
    return 2;
  }
  const std::string root = argv[1];
  const std::size_t rank = argc == 4 ? std::stoul(argv[2]) : 0;
  const std::size_t world = argc == 4 ? std::stoul(argv[3]) : 1;
  const std::uint64_t seed = 2026;
  const std::array<float, 3> mean = {0.485F, 0.456F, 0.406F};
  const std::array<float, 3> std = {0.229F, 0.224F, 0.225F};

  // Training input: every epoch a new permutation, the same on every rank; this rank's shard.
  crema::image_folder_source train(root);
  train.shuffle(seed).shard(rank, world);
  crema::image_batcher augment(
      crema::image_transform({.geometry = crema::random_resized_crop{224, 224},
                              .mirror = true,
                              .mean = mean,
                              .std = std}),
      crema::make_host_batch<float>{});
  crema::double_buffered_pipeline training{
      std::move(train), std::move(augment),
      {.batch_size = 8, .producers = 2, .threads = 2, .seed = seed}};

  // Evaluation input: in order, one pass, the last batch kept short.
  crema::image_batcher evaluate(
      crema::image_transform({.geometry = crema::resize_center_crop{256, 224, 224},
                              .mean = mean,
                              .std = std}),
      crema::make_host_batch<float>{});
  crema::double_buffered_pipeline evaluation{
      crema::image_folder_source(root), std::move(evaluate),
      {.batch_size = 8, .producers = 2, .threads = 2,
       .mode = crema::pipeline_mode::single_pass}};

  std::size_t steps = 0;
  for (auto batch : training.consumer(0)) {
    // batch->data: 8 x 3 x 224 x 224 floats, normalised; batch->labels: the classes.
    if (++steps == 4) break;
  }
  std::size_t seen = 0;
  double sum = 0;
  for (auto batch : evaluation.consumer(0)) {
    seen += batch->size();
    for (std::size_t i = 0; i < batch->size() * 3 * 224 * 224; ++i) sum += batch->data[i];
  }
  fmt::print("trained {} steps of 8; evaluated {} images of 3 x 224 x 224, mean value {:.3f}\n",
             steps, seen, sum / (static_cast<double>(seen) * 3 * 224 * 224));
  return seen > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
