// The head-state machine of synced_buffer, walked through: a 1 M-element blob over one training
// step of a Caffe-style engine, with what each access cost (uploads, downloads, zero fills);
// then the same flow with the head checked at compile time (typed_buffer), and an asynchronous
// upload on an emulated stream.
//
// Runs on any machine: the device is crema's emulated device (host memory, counted transfers).

#include <crema/crema.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <numeric>
#include <string_view>

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

}  // namespace

int main() {
  crema::emulated_device device(0);
  one_training_step(device);
  typed_flow(device);
  const auto total = device.stats();
  fmt::print("total: {} downloads ({} bytes), {} bytes still allocated on the device\n",
             total.downloads, total.bytes_downloaded, total.live_bytes);
}
