#pragma once

#include <crema/io/nvjpeg/nvjpeg_batch_decoder.cuh>
#include <crema/io/nvjpeg/nvjpeg_batcher.hpp>

/// @file
/// `nvjpeg_batcher<T>`: the pipeline's batch transform whose batches are decoded by nvJPEG and
/// resampled by crema's kernels on the GPU, for nvcc translation units (nvjpeg_batcher.hpp says
/// what it does). Component `crema::nvjpeg`.

namespace crema::cuda {

/// @brief The GPU's batch transform: batches of T (float, normalised; or std::uint8_t), labels
/// of `Label`.
template <class T, class Label = batch_label_t<T>>
using nvjpeg_batcher = basic_nvjpeg_batcher<T, nvjpeg_batch_decoder, Label>;

}  // namespace crema::cuda
