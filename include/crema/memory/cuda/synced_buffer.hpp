#pragma once

#include <crema/memory/cuda/cuda_device_resource.hpp>
#include <crema/memory/cuda/host_pinned_resource.hpp>
#include <crema/memory/synced_buffer.hpp>
#include <crema/memory/typed_buffer.hpp>

namespace crema::cuda {

/// @brief The CUDA `synced_buffer`: pinned host memory and `cudaMalloc` device memory, copies
/// with the CUDA runtime, asynchronous copies on a `crema::cuda_stream`.
///
/// A name of its own rather than a default that changes with the linked component, so that two
/// translation units never see two different types under one name.
template <class T>
using synced_buffer = ::crema::synced_buffer<T, host_pinned_resource, cuda_device_resource>;

/// @brief The CUDA `typed_buffer`, on the same resources as `crema::cuda::synced_buffer`.
template <class T, head Head>
using typed_buffer = ::crema::typed_buffer<T, Head, host_pinned_resource, cuda_device_resource>;

}  // namespace crema::cuda
