#include "gpu/kernels.hpp"

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/io/caffe/cuda/caffe_normalize.cuh>

namespace crema::bench::gpu {
namespace {

constexpr unsigned threads = 128;

__device__ float sum_of_firsts(const float* data, std::size_t record_elements,
                               std::size_t records) {
  float sum = 0.0f;
  for (std::size_t i = threadIdx.x; i < records; i += blockDim.x) sum += data[i * record_elements];
  return sum;
}

__global__ void touch_records_kernel(const float* data, std::size_t record_elements,
                                     std::size_t records, float* sink) {
  atomicAdd(sink, sum_of_firsts(data, record_elements, records));
}

__global__ void busy_step_kernel(const float* data, std::size_t record_elements,
                                 std::size_t records, float* sink, long long cycles) {
  const long long start = clock64();
  const float sum = sum_of_firsts(data, record_elements, records);
  while (clock64() - start < cycles) {
  }
  atomicAdd(sink, sum);
}

}  // namespace

void touch_records(const float* data, std::size_t record_elements, std::size_t records, float* sink,
                   cudaStream_t stream) {
  touch_records_kernel<<<1, threads, 0, stream>>>(data, record_elements, records, sink);
  CREMA_CUDA_TRY(cudaGetLastError());
}

void busy_step(const float* data, std::size_t record_elements, std::size_t records, float* sink,
               std::int64_t cycles, cudaStream_t stream) {
  busy_step_kernel<<<1, threads, 0, stream>>>(data, record_elements, records, sink,
                                              static_cast<long long>(cycles));
  CREMA_CUDA_TRY(cudaGetLastError());
}

void normalize_bytes(const std::uint8_t* in, std::size_t count, float* out,
                     crema::record_shape shape, const crema::caffe_normalization& normalization,
                     cudaStream_t stream) {
  crema::cuda::caffe_normalize({in, count}, out, shape, normalization, stream);
}

}  // namespace crema::bench::gpu
