// Compiled and linked by nvcc in the cuda-compile preset: crema's headers under nvcc, a kernel
// over a device_span's pointer and size, and the whole CUDA buffer flow. Runs only on a GPU.
#include <crema/crema.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/cuda/fill.cuh>
#include <crema/memory/cuda/synced_buffer.hpp>

#include "common/cuda_skip.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <numeric>

namespace {

__global__ void scale(float* data, std::size_t size, float factor) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < size) data[i] *= factor;
}

}  // namespace

TEST_CASE("a kernel scales a CUDA synced_buffer on the device and the host sees the result") {
  if (crema::test::skip_without_cuda_device()) return;
  crema::cuda_stream stream;
  crema::cuda::synced_buffer<float> buffer(100000);
  auto host = buffer.mutable_host();
  std::iota(host.begin(), host.end(), 0.0f);
  buffer.upload_async(stream);
  const auto on_device = buffer.mutable_device();  // waits for the upload
  const unsigned blocks = static_cast<unsigned>((on_device.size() + 255) / 256);
  scale<<<blocks, 256, 0, stream.native_handle()>>>(on_device.data(), on_device.size(), 2.0f);
  CREMA_CUDA_TRY(cudaGetLastError());
  stream.synchronize();
  CHECK(buffer.host()[99999] == 199998.0f);
}

TEST_CASE("fill sets every element of a device span on the stream") {
  if (crema::test::skip_without_cuda_device()) return;
  crema::cuda_stream stream;
  crema::cuda::synced_buffer<float> buffer(1 << 20);
  crema::cuda::fill(buffer.mutable_device(), 1.5f, stream);
  stream.synchronize();
  CHECK(buffer.host()[0] == 1.5f);
  CHECK(buffer.host()[(1 << 20) - 1] == 1.5f);
}
