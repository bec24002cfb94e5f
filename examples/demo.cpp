// crema-demo: walks a synced_buffer through every head state, the way a Caffe-style engine uses
// a blob over one training step, and prints what each access cost. Then does the same flow with
// the head checked at compile time, and an asynchronous upload on an emulated stream. Then feeds
// a small training loop with device batches that a double_buffered_pipeline fills and uploads on
// its producers' side, and finally trains a tiny model data-parallel on two solver threads that
// a pipeline feeds and p2p_sync keeps in step, as Caffe's P2PSync did.
//
// Runs on any machine: the device is crema's emulated device (host memory, counted transfers).

#include <crema/crema.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <memory>
#include <cstdint>
#include <numeric>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using blob = crema::synced_buffer<float>;

class reporter {
 public:
  explicit reporter(crema::emulated_device& device) : device_(device) {}

  void after(std::string_view what, const blob& buffer) {
    const auto now = device_.stats();
    fmt::print("  {:<44} head {:<13} uploads +{} downloads +{} zero fills +{}\n", what,
               crema::to_string(buffer.head()), now.uploads - last_.uploads,
               now.downloads - last_.downloads, now.zero_fills - last_.zero_fills);
    last_ = now;
  }

 private:
  crema::emulated_device& device_;
  crema::emulated_device_stats last_{};
};

void one_training_step(crema::emulated_device& device) {
  fmt::print("one training step of a 1 M-element blob on emulated device {}:\n", device.id());
  reporter report(device);
  blob data(1 << 20, {}, crema::emulated_device_resource{device});
  report.after("made", data);

  auto host = data.mutable_host();
  std::iota(host.begin(), host.end(), 0.0f);
  report.after("the data layer fills it on the host", data);
  (void)data.device();
  report.after("forward reads it on the device", data);
  (void)data.device();
  report.after("a second layer reads it again", data);
  (void)data.mutable_device();
  report.after("backward writes it on the device", data);
  const float sum = std::reduce(data.host().begin(), data.host().end(), 0.0f);
  report.after("the solver reads it on the host", data);
  (void)data.mutable_host();
  report.after("the solver updates it on the host", data);
  fmt::print("  checksum {:.6g}\n", sum);
}

void typed_flow(crema::emulated_device& device) {
  fmt::print("the same flow with the head in the type:\n");
  crema::emulated_stream side_stream;  // a worker thread standing in for a CUDA stream
  crema::typed_buffer<float, crema::head::uninitialized> fresh(
      4096, {}, crema::emulated_device_resource{device});
  auto at_host = std::move(fresh).claim_host();
  std::ranges::fill(at_host.mutable_host(), 1.0f);
  // upload_async compiles only because the type says the head is at_host.
  auto synced = std::move(at_host).upload_async(side_stream);
  fmt::print("  upload queued on the side stream; device() waits for it: {} elements\n",
             synced.device().size());
  auto at_device = std::move(synced).claim_device();
  auto back = std::move(at_device).to_host();
  fmt::print("  back on the host, head {}; element 0 = {}\n",
             crema::to_string(decltype(back)::current_head), back.host()[0]);
}

// A tiny image data set: 3 x 8 x 8 bytes per image, made here, with its label in the first byte.
using image = std::array<std::uint8_t, 3 * 8 * 8>;

std::vector<image> make_images(std::size_t count) {
  std::vector<image> images(count);
  for (std::size_t i = 0; i < count; ++i) {
    for (std::size_t j = 0; j < images[i].size(); ++j) {
      images[i][j] = static_cast<std::uint8_t>((i * 31 + j * 7) % 251);
    }
  }
  return images;
}

// Fills device batches on the producers' threads: pixels scaled to [0, 1] with a random
// brightness jitter drawn from the record's own generator (the same on every run), the label
// from the first byte. The batch's finishing step uploads it on the consumer device's stream.
struct to_device_batch {
  using batch_type = crema::device_batch<float>;
  std::shared_ptr<crema::emulated_stream> uploads;
  crema::emulated_device* device;

  batch_type make_batch(const crema::batch_context& where) const {
    return batch_type(where.batch_size, {3, 8, 8}, uploads, {},
                      crema::emulated_device_resource{*device});
  }
  void operator()(const image& pixels, batch_type& batch,
                  const crema::sample_context& sample) const {
    auto rng = sample.rng();
    const float jitter = static_cast<float>(rng.uniform(0.9, 1.1));
    std::ranges::transform(pixels, batch.record(sample.index).begin(), [&](std::uint8_t p) {
      return static_cast<float>(p) / 255.0f * jitter;
    });
    batch.set_label(sample.index, static_cast<float>(pixels[0] % 10));
  }
};

void pipeline_training(crema::emulated_device& device) {
  constexpr std::size_t batch_size = 32;
  constexpr std::size_t steps = 100;
  fmt::print(
      "a training loop fed by a pipeline: {} steps of {} images, 4 producers on 2 threads "
      "filling and uploading device batches:\n",
      steps, batch_size);
  const auto before = device.stats();
  crema::emulated_stream compute;  // the training step's stream
  double checksum = 0;
  {
    crema::double_buffered_pipeline pipe{
        crema::vector_source<image>(make_images(1000), "demo"),
        to_device_batch{std::make_shared<crema::emulated_stream>(), &device},
        {.batch_size = batch_size,
         .prefetch = 4,
         .producers = 4,
         .threads = 2,
         .ordered = true,
         .seed = 7}};
    auto consumer = pipe.consumer(0);
    for (std::size_t step = 0; step < steps; ++step) {
      auto batch = consumer.pull();
      // The "forward pass" reads the batch on the device: its stream waits for the upload the
      // producer started, the host does not.
      const float* pixels = batch->data.device(compute).data();
      compute.launch([&checksum, pixels] { checksum += static_cast<double>(pixels[0]); });
      batch.release_after(compute.record());  // the slot is refilled after the step read it
    }
    compute.synchronize();
    pipe.stop();
    const auto stats = pipe.stats();
    const auto after = device.stats();
    fmt::print("  pipeline: {}\n", stats);
    fmt::print(
        "  {} uploads per batch made (data and labels, started by the producers); checksum "
        "{:.4f}\n",
        static_cast<double>(after.uploads - before.uploads) /
            static_cast<double>(stats.batches_produced),
        checksum);
  }
}

// A linear regression sample: y = w* . x, with w* = (1, -2, 3, -4, 5, -6, 7, -8) / 8.
struct sample {
  std::array<float, 8> x;
  float y;
};

float true_weight(std::size_t j) {
  const int k = static_cast<int>(j) + 1;
  return static_cast<float>(j % 2 == 0 ? k : -k) / 8.0f;
}

std::vector<sample> make_samples(std::size_t count) {
  std::vector<sample> samples(count);
  std::uint32_t state = 12345;
  for (auto& s : samples) {
    s.y = 0;
    for (std::size_t j = 0; j < s.x.size(); ++j) {
      state = state * 1664525U + 1013904223U;
      s.x[j] = static_cast<float>(state >> 8) / static_cast<float>(1U << 24) * 2.0f - 1.0f;
      s.y += true_weight(j) * s.x[j];
    }
  }
  return samples;
}

// Returns the mean squared error of `w` on the batch and leaves its gradient in `gradient`.
template <class Batch>
float mse_gradient(const std::vector<float>& w, const Batch& batch, std::span<float> gradient) {
  std::fill(gradient.begin(), gradient.end(), 0.0f);
  float loss = 0;
  for (const sample& s : batch) {
    float error = -s.y;
    for (std::size_t j = 0; j < w.size(); ++j) error += w[j] * s.x[j];
    loss += error * error;
    for (std::size_t j = 0; j < w.size(); ++j) gradient[j] += 2.0f * error * s.x[j];
  }
  const float n = static_cast<float>(batch.size());
  for (float& g : gradient) g /= n;
  return loss / n;
}

bool data_parallel_training() {
  constexpr std::size_t solvers = 2;
  constexpr std::size_t steps = 300;
  constexpr float learning_rate = 0.2f;
  fmt::print(
      "data-parallel SGD on {} solver threads, a pipeline dealing them batches and "
      "p2p_sync averaging their gradients:\n",
      solvers);
  crema::double_buffered_pipeline pipe{
      crema::vector_source<sample>(make_samples(4096), "regression"),
      [](const sample& s) { return s; },
      {.batch_size = 64, .prefetch = 4, .producers = 2, .threads = 1, .consumers = solvers}};
  const std::vector<int> ids{0, 1};
  const auto tree = crema::tree_topology::flat(ids);
  std::vector<std::vector<float>> parameters(solvers, std::vector<float>(8, 0.0f));
  std::vector<std::vector<float>> gradients(solvers, std::vector<float>(8, 0.0f));
  crema::host_p2p_sync<float> sync(tree, {parameters[0], parameters[1]}, {gradients[0], gradients[1]});
  std::array<float, solvers> first_loss{};
  std::array<float, solvers> last_loss{};
  std::vector<std::jthread> threads;
  for (std::size_t p = 0; p < solvers; ++p) {
    threads.emplace_back([&, p] {
      auto consumer = pipe.consumer(p);
      for (std::size_t step = 0; step < steps; ++step) {
        sync.on_start(p);  // the root's parameters arrive
        const auto batch = consumer.pull();
        const float loss = mse_gradient(parameters[p], *batch, gradients[p]);
        if (step == 0) first_loss[p] = loss;
        last_loss[p] = loss;
        sync.on_gradients_ready(p);  // the root gets the average
        if (p == tree.root()) {
          for (std::size_t j = 0; j < 8; ++j) parameters[p][j] -= learning_rate * gradients[p][j];
        }
      }
    });
  }
  threads.clear();  // joins
  float distance = 0;
  for (std::size_t j = 0; j < 8; ++j) {
    const float error = parameters[tree.root()][j] - true_weight(j);
    distance += error * error;
  }
  distance = std::sqrt(distance);
  fmt::print("  loss {:.4f} -> {:.2e} in {} steps; distance to the true weights {:.2e}\n",
             (first_loss[0] + first_loss[1]) / 2, (last_loss[0] + last_loss[1]) / 2, steps,
             distance);
  return distance < 1e-3f;
}

}  // namespace

int main() {
  fmt::print("crema {}.{}.{} demo\n", crema::version.major, crema::version.minor,
             crema::version.patch);
  crema::emulated_device device(0);
  one_training_step(device);
  typed_flow(device);
  pipeline_training(device);
  if (!data_parallel_training()) {
    fmt::print("the data-parallel model did not converge\n");
    return 1;
  }
  const auto total = device.stats();
  fmt::print("total: {} downloads ({} bytes), {} bytes still allocated on the device\n",
             total.downloads, total.bytes_downloaded, total.live_bytes);
}
