#pragma once

// The consumer's side of the GPU benchmarks: kernels that stand for a training step, launched from
// C++ compiled by the host compiler (the kernels themselves are in kernels.cu, built by nvcc).

#include <crema/core/record_shape.hpp>
#include <crema/io/caffe/caffe_normalization.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace crema::bench::gpu {

/// A step that costs nothing: reads the first value of each of `records` records of
/// `record_elements` floats and adds them into `*sink`, so the step depends on the batch.
void touch_records(const float* data, std::size_t record_elements, std::size_t records, float* sink,
                   cudaStream_t stream);

/// A step of a chosen length: reads as `touch_records`, then keeps one block busy until
/// `cycles` clock cycles of its multiprocessor have passed.
void busy_step(const float* data, std::size_t record_elements, std::size_t records, float* sink,
               std::int64_t cycles, cudaStream_t stream);

/// A batch of bytes made floats: `crema::cuda::caffe_normalize` of `count` bytes (whole records
/// of `shape`) into `out`, for callers the host compiler builds.
void normalize_bytes(const std::uint8_t* in, std::size_t count, float* out,
                     crema::record_shape shape, const crema::caffe_normalization& normalization,
                     cudaStream_t stream);

}  // namespace crema::bench::gpu
