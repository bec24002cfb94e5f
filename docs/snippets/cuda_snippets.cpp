// docs/getting-started.md's CUDA snippet, compiled against the CUDA runtime wherever the toolkit
// is found (the cuda-compile preset in CI), and run where a GPU is.
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/cuda/synced_buffer.hpp>

#include <cuda_runtime_api.h>
#include <fmt/core.h>

#include <algorithm>
#include <cstddef>
#include <span>

namespace {

void fill(std::span<float> data) { std::ranges::fill(data, 1.0f); }
void launch_forward(const float* data, std::size_t size) { (void)data, (void)size; }

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    fmt::print("no CUDA device: nothing to run\n");
    return 0;
  }
  const std::size_t count = 1 << 20;
  crema::cuda_stream copies;                      // a non-blocking stream on the current device
  crema::cuda::synced_buffer<float> blob(count);  // pinned host memory + cudaMalloc
  fill(blob.mutable_host());
  blob.upload_async(copies);                          // returns at once; head() stays at_host ...
  launch_forward(blob.device().data(), blob.size());  // ... and device() waits for the copy
  fmt::print("the snippet ran: {} floats on the device\n", blob.device().size());
}
