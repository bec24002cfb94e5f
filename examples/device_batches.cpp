// Two solvers, each on its own (emulated) device, fed device batches that the pipeline's
// producers fill, augment reproducibly and upload: the consumers only use them.
#include <crema/crema.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

using image = std::array<std::uint8_t, 3 * 28 * 28>;

struct augment {
  using batch_type = crema::device_batch<float>;
  std::vector<std::shared_ptr<crema::emulated_stream>> uploads;  // one per consumer device

  batch_type make_batch(const crema::batch_context& where) const {  // once per slot
    return batch_type(where.batch_size, {3, 28, 28}, uploads.at(where.consumer));
  }
  void operator()(const image& pixels, batch_type& batch, const crema::sample_context& s) const {
    auto rng = s.rng();  // keyed by (seed, epoch, position): the same on every run
    const bool mirror = rng.bernoulli(0.5);
    auto out = batch.record(s.index);
    for (std::size_t i = 0; i < pixels.size(); ++i) {
      const std::size_t x = i % 28;
      out[mirror ? i - x + 27 - x : i] = static_cast<float>(pixels[i]) / 255.0f;
    }
    batch.set_label(s.index, static_cast<float>(pixels[0] % 10));
  }
};

int main() {
  std::vector<image> images(1000);
  for (std::size_t i = 0; i < images.size(); ++i) images[i].fill(static_cast<std::uint8_t>(i));
  augment transform{
      {std::make_shared<crema::emulated_stream>(), std::make_shared<crema::emulated_stream>()}};
  crema::double_buffered_pipeline pipe{
      crema::vector_source<image>(images, "train"),
      transform,
      {.batch_size = 64, .prefetch = 4, .producers = 4, .threads = 2, .consumers = 2, .seed = 7}};
  std::vector<std::jthread> solvers;
  for (std::size_t i = 0; i < 2; ++i) {
    solvers.emplace_back([&pipe, i] {
      crema::emulated_stream compute;  // solver i's stream on its device
      auto consumer = pipe.consumer(i);
      for (int step = 0; step < 50; ++step) {
        auto batch = consumer.pull();  // batches i, i + 2, i + 4, ... of the source
        const float* data = batch->device(compute).data.data();  // compute waits for the upload
        compute.launch([data] { (void)data[0]; });               // the forward pass, say
        batch.release_after(compute.record());  // refilled once the device is done with it
      }
      compute.synchronize();
    });
  }
  solvers.clear();  // joins
  fmt::print("{}\n", pipe.stats());
}
