// Compiled and linked by nvcc in the cuda-compile preset: crema's headers under nvcc, a kernel
// over a device_span's pointer and size, and the whole CUDA buffer flow. Runs only on a GPU.
#include <crema/crema.hpp>
#include <crema/io/caffe/caffe_normalization.hpp>
#include <crema/io/caffe/caffe_transform.hpp>
#include <crema/io/caffe/cuda/caffe_normalize.cuh>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/cuda/fill.cuh>
#include <crema/memory/cuda/synced_buffer.hpp>

#include "common/cuda_skip.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <vector>

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

TEST_CASE("caffe_normalize gives the host's normalised values bit for bit, a batch of bytes") {
  if (crema::test::skip_without_cuda_device()) return;
  // 5 records of 3 x 28 x 28 bytes; per-channel means and one mean for all.
  constexpr crema::record_shape shape{3, 28, 28};
  constexpr std::size_t count = 5 * 3 * 28 * 28;
  std::vector<std::uint8_t> bytes(count);
  for (std::size_t i = 0; i < count; ++i) bytes[i] = static_cast<std::uint8_t>((i * 37 + 11) % 256);
  for (const crema::caffe_transform_options& options :
       {crema::caffe_transform_options{.scale = 0.017f, .mean_values = {104.0f, 117.0f, 123.0f}},
        crema::caffe_transform_options{.scale = 0.5f, .mean_values = {100.0f}},
        crema::caffe_transform_options{}}) {
    const crema::caffe_normalization normalization =
        crema::caffe_transform(options).normalization();
    std::vector<float> expected(count);
    crema::caffe_normalize_on_host(bytes, expected, shape, normalization);

    crema::cuda_stream stream;
    std::uint8_t* in = nullptr;
    float* out = nullptr;
    CREMA_CUDA_TRY(cudaMalloc(&in, count));
    CREMA_CUDA_TRY(cudaMalloc(&out, count * sizeof(float)));
    CREMA_CUDA_TRY(cudaMemcpy(in, bytes.data(), count, cudaMemcpyHostToDevice));
    crema::cuda::caffe_normalize({in, count}, out, shape, normalization, stream.native_handle());
    std::vector<float> got(count);
    stream.synchronize();
    CREMA_CUDA_TRY(cudaMemcpy(got.data(), out, count * sizeof(float), cudaMemcpyDeviceToHost));
    CREMA_CUDA_TRY(cudaFree(in));
    CREMA_CUDA_TRY(cudaFree(out));
    CHECK(std::memcmp(got.data(), expected.data(), count * sizeof(float)) == 0);
  }
  // Part of a record is refused before anything is queued.
  CHECK_THROWS_AS(crema::cuda::caffe_normalize({nullptr, 100}, nullptr, shape,
                                               crema::caffe_normalization{}, nullptr),
                  crema::length_error);
}
