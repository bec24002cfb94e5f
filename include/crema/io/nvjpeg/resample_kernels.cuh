#pragma once

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/io/image/resample_jobs.hpp>

#include <cuda_runtime.h>

#include <cstdint>

/// @file
/// The GPU side of `resample_jobs`, for nvcc translation units: the horizontal pass (decoded
/// windows to 8-bit kept rows), then the vertical pass and the output's values, one thread a
/// value with the functions a CPU test checks against `image_transform`. Component
/// `crema::nvjpeg`.

namespace crema::cuda {
namespace detail {

// Block (row, job): the job's kept row `row`, its threads across the row's values. (A template,
// so that every translation unit that includes this header may define it.)
template <class Byte>
__global__ void resample_across_kernel(const resample_job* jobs, const std::int32_t* table,
                                       const Byte* decoded, Byte* kept) {
  const resample_job job = jobs[blockIdx.y];
  const auto row = static_cast<std::int32_t>(blockIdx.x);
  if (row >= job.kept_rows) return;
  const std::int32_t values = job.kept_width * job.channels;
  Byte* to = kept + job.kept + static_cast<std::uint64_t>(row) * values;
  for (auto i = static_cast<std::int32_t>(threadIdx.x); i < values;
       i += static_cast<std::int32_t>(blockDim.x)) {
    to[i] = across_value(job, table, decoded, row, i);
  }
}

// Block (row, job): the job's output row `row`.
template <class T>
__global__ void resample_down_kernel(const resample_job* jobs, const std::int32_t* table,
                                     const std::uint8_t* kept, resample_output format, T* out) {
  const resample_job job = jobs[blockIdx.y];
  const auto row = static_cast<std::int32_t>(blockIdx.x);
  if (row >= job.out_height) return;
  const std::int32_t values = job.out_width * job.channels;
  for (auto i = static_cast<std::int32_t>(threadIdx.x); i < values;
       i += static_cast<std::int32_t>(blockDim.x)) {
    write_value(job, format, out, row, i, down_value(job, table, kept, row, i));
  }
}

}  // namespace detail

/// @brief Queues both passes of a batch's jobs on `stream` (every pointer on the device).
/// @throws crema::cuda_error if a launch fails
template <class T>
void launch_resample_jobs(const resample_launch<T>& launch, cudaStream_t stream) {
  if (launch.count == 0) return;
  constexpr unsigned threads = 256;
  const dim3 across(static_cast<unsigned>(launch.most_kept_rows),
                    static_cast<unsigned>(launch.count));
  detail::resample_across_kernel<std::uint8_t>
      <<<across, threads, 0, stream>>>(launch.jobs, launch.table, launch.decoded, launch.kept);
  CREMA_CUDA_TRY(cudaGetLastError());
  const dim3 down(static_cast<unsigned>(launch.most_out_rows), static_cast<unsigned>(launch.count));
  detail::resample_down_kernel<T><<<down, threads, 0, stream>>>(
      launch.jobs, launch.table, launch.kept, launch.format, launch.out);
  CREMA_CUDA_TRY(cudaGetLastError());
}

/// @brief The resampling policy of `nvjpeg_batch_decoder`: the kernels above.
struct kernel_resampler {
  template <class T>
  void operator()(const resample_launch<T>& launch, cudaStream_t stream) const {
    launch_resample_jobs(launch, stream);
  }
};

}  // namespace crema::cuda
