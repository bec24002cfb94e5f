// synced_buffer in a few lines: a buffer mirrored between host and device, moved lazily.
#include <crema/crema.hpp>

#include <fmt/core.h>

#include <numeric>

int main() {
  crema::synced_buffer<float> weights(1024);  // nothing allocated yet
  auto host = weights.mutable_host();         // host side: allocated, zeroed, the head
  std::iota(host.begin(), host.end(), 0.0f);
  crema::device_span<const float> on_device = weights.device();  // one upload, then synced
  // ... hand on_device.data() and on_device.size() to a kernel ...
  const float first = weights.host()[1];  // synced: no copy
  fmt::print("head {} after {} upload(s), weights[1] = {}, {} elements on device {}\n",
             crema::to_string(weights.head()), weights.device_resource().device().stats().uploads,
             first, on_device.size(), weights.device_id());
}
