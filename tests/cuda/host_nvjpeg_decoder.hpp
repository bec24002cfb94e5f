#pragma once

// nvJPEG's batch decoder for tests linked with the fake nvJPEG (fake_nvjpeg.hpp) and the counting
// CUDA runtime (counting_runtime.hpp): the resampling kernels' per-value functions run on the
// host, whose memory the counting runtime's device memory is.

#include <crema/io/image/resample_jobs.hpp>
#include <crema/io/nvjpeg/nvjpeg_batch_decoder.hpp>

#include "counting_runtime.hpp"

#include <cuda_runtime_api.h>

namespace crema::test {

/// The kernels' functions, on the host. As a kernel's launch: refused on a stream of another
/// device than the current one.
struct host_resampler {
  template <class T>
  void operator()(const crema::resample_launch<T>& launch, cudaStream_t stream) const {
    if (!counting_cuda::launchable_on(stream)) {
      throw crema::cuda_error(cudaErrorInvalidResourceHandle, "resampling on another device");
    }
    crema::run_on_host(launch);
  }
};

using host_nvjpeg_decoder = crema::cuda::basic_nvjpeg_batch_decoder<host_resampler>;

}  // namespace crema::test
