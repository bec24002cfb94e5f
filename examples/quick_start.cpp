// The data layer feeding a training loop: a folder of JPEGs (one folder per class) read by two
// producers that decode only each sample's crop, augment it and batch it while the loop trains.
//   quick_start ROOT
#include <crema/io/image/image_batcher.hpp>
#include <crema/io/image/image_folder_source.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/host_batch.hpp>

#include <fmt/core.h>

#include <utility>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  // ROOT/CLASS/FILE, classes numbered as torchvision numbers them; a new order every epoch.
  crema::image_folder_source images(argv[1]);
  images.shuffle(42);
  crema::image_batcher augment(
      crema::image_transform({.geometry = crema::random_resized_crop{224, 224},
                              .mirror = true,
                              .mean = {0.485F, 0.456F, 0.406F},
                              .std = {0.229F, 0.224F, 0.225F}}),
      crema::make_host_batch<float>{});
  crema::double_buffered_pipeline pipe{std::move(images),
                                       std::move(augment),
                                       {.batch_size = 8, .producers = 2, .threads = 2, .seed = 42}};
  auto loader = pipe.consumer(0);
  for (int step = 0; step < 10; ++step) {
    auto batch = loader.pull();  // made while the last step ran; its slot returns at scope's end
    // train_step(batch->data, batch->labels): 8 x 3 x 224 x 224 floats, 8 labels
    (void)batch;
  }
  fmt::print("trained 10 steps of 8; the pipeline {}\n", pipe.stats());
}
