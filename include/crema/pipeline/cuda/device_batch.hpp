#pragma once

#include <crema/memory/cuda/cuda_device_resource.hpp>
#include <crema/memory/cuda/host_pinned_resource.hpp>
#include <crema/pipeline/device_batch.hpp>

namespace crema::cuda {

/// @brief The CUDA `device_batch`: pinned host memory (so the uploads are truly asynchronous),
/// `cudaMalloc` memory on the consumer's device, uploads on a `cuda_stream` of that device, and
/// `cudaStreamWaitEvent` where a stream waits for them. Labels as `crema::device_batch` has them.
template <class T, class Label = batch_label_t<T>>
using device_batch = ::crema::device_batch<T, host_pinned_resource, cuda_device_resource, Label>;

}  // namespace crema::cuda
