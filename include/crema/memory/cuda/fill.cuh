#pragma once

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/device_span.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>

/// @file
/// Device-side fill, for nvcc translation units (`.cu`). `cudaMemset` sets bytes; this sets
/// elements, so a buffer of floats can start at 1.0f.

namespace crema::cuda {
namespace detail {

template <class T>
__global__ void fill_kernel(T* data, std::size_t size, T value) {
  const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < size;
       i += stride) {
    data[i] = value;
  }
}

}  // namespace detail

/// @brief Queues a kernel on `stream` that sets every element of `span` to `value`.
/// Returns at once; an empty span queues nothing. Thread-safe as the CUDA runtime is.
/// @throws crema::cuda_error if the launch fails
template <class T>
void fill(device_span<T> span, T value, cuda_stream& stream) {
  if (span.empty()) return;
  constexpr unsigned threads = 256;
  const auto blocks =
      static_cast<unsigned>(std::min<std::size_t>((span.size() + threads - 1) / threads, 4096));
  detail::fill_kernel<<<blocks, threads, 0, stream.native_handle()>>>(span.data(), span.size(),
                                                                      value);
  CREMA_CUDA_TRY(cudaGetLastError());
}

}  // namespace crema::cuda
