#pragma once

#include <crema/io/nvjpeg/nvjpeg_batch_decoder.hpp>
#include <crema/io/nvjpeg/resample_kernels.cuh>

/// @file
/// `nvjpeg_batch_decoder`: JPEG batches decoded by nvJPEG and resampled by crema's kernels on the
/// GPU, for nvcc translation units (nvjpeg_batch_decoder.hpp says what it does). Component
/// `crema::nvjpeg`.

namespace crema::cuda {

/// @brief The GPU decoder: nvJPEG, then the resampling kernels.
using nvjpeg_batch_decoder = basic_nvjpeg_batch_decoder<kernel_resampler>;

}  // namespace crema::cuda
