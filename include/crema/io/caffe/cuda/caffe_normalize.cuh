#pragma once

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/record_shape.hpp>
#include <crema/io/caffe/caffe_normalization.hpp>
#include <crema/memory/device_span.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

/// @file
/// The mean and scale of Caffe's transform on the GPU, for batches of `std::uint8_t` pixels (the
/// crop and mirror done on the host): one thread a value, the arithmetic of
/// `caffe_normalization`, so the values are the float path's, bit for bit. For nvcc translation
/// units.

namespace crema::cuda {
namespace detail {

// A template, so that every translation unit that includes this header may define it.
template <class Byte>
__global__ void caffe_normalize_kernel(const Byte* in, float* out, std::size_t count,
                                       std::size_t plane, std::size_t channels,
                                       caffe_normalization normalization) {
  const std::size_t step = static_cast<std::size_t>(gridDim.x) * blockDim.x;
  for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += step) {
    out[i] = normalization(in[i], (i / plane) % channels);
  }
}

}  // namespace detail

/// @brief Queues on `stream` the normalisation of `in` (whole records of `shape`, channel-first
/// bytes: a `device_batch<std::uint8_t>`'s data) into `out` (as many floats, device memory), and
/// returns.
/// @throws crema::length_error unless `in` holds a whole number of records
/// @throws crema::cuda_error if the kernel cannot be launched
inline void caffe_normalize(device_span<const std::uint8_t> in, float* out, record_shape shape,
                            const caffe_normalization& normalization, cudaStream_t stream) {
  const std::size_t record = shape.elements();
  if (record == 0 || in.size() % record != 0) {
    ::crema::detail::fail<length_error>(
        "caffe_normalize: {} bytes are not a whole number of records of {} values", in.size(),
        record);
  }
  if (in.size() == 0) return;
  constexpr unsigned threads = 256;
  const std::size_t wanted = (in.size() + threads - 1) / threads;
  const auto blocks = static_cast<unsigned>(std::min<std::size_t>(wanted, 65535));
  detail::caffe_normalize_kernel<<<blocks, threads, 0, stream>>>(
      in.data(), out, in.size(), shape.height * shape.width, shape.channels, normalization);
  CREMA_CUDA_TRY(cudaGetLastError());
}

}  // namespace crema::cuda
