#pragma once

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/memory/cuda/cuda_device_resource.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/resource.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>

namespace crema {

/// @brief Stream-ordered device memory: `cudaMallocAsync` / `cudaFreeAsync` on one stream,
/// served from the device's memory pool.
///
/// The stream is borrowed and must outlive the resource and its copies. Its synchronous copies
/// and fills run on that stream and wait for it, so they are ordered after the allocation; an
/// asynchronous copy on another stream first makes that stream wait for this one. Otherwise as
/// `cuda_device_resource`.
class cuda_async_device_resource : public cuda_device_resource {
 public:
  /// @param allocation_stream the stream allocations and frees are ordered on
  explicit cuda_async_device_resource(cuda_stream& allocation_stream) noexcept
      : cuda_device_resource(allocation_stream.device_id()),
        stream_(allocation_stream.native_handle()) {}

  /// @throws crema::allocation_error if the pool cannot provide `bytes` bytes
  [[nodiscard]] void* allocate(std::size_t bytes,
                               std::size_t alignment = alignof(std::max_align_t)) {
    return allocate_with(bytes, alignment, [this](void** pointer, std::size_t size) {
      return cudaMallocAsync(pointer, size, stream_);
    });
  }
  /// @brief Frees, ordered after the work queued on the allocation stream.
  void deallocate(void* pointer, std::size_t /*bytes*/,
                  std::size_t /*alignment*/ = alignof(std::max_align_t)) noexcept {
    if (pointer != nullptr) (void)cudaFreeAsync(pointer, stream_);
  }

  void fill_zero(void* destination, std::size_t bytes) {
    cuda::scoped_device on(device_id());
    CREMA_CUDA_TRY(cudaMemsetAsync(destination, 0, bytes, stream_));
    CREMA_CUDA_TRY(cudaStreamSynchronize(stream_));
  }
  void copy_to_device(void* destination, const void* source, std::size_t bytes) {
    copy_now(destination, source, bytes, cudaMemcpyHostToDevice);
  }
  void copy_to_host(void* destination, const void* source, std::size_t bytes) {
    copy_now(destination, source, bytes, cudaMemcpyDeviceToHost);
  }
  void copy_to_device_async(void* destination, const void* source, std::size_t bytes,
                            stream_type& stream) {
    order_after_allocations(stream);
    cuda_device_resource::copy_to_device_async(destination, source, bytes, stream);
  }
  void copy_to_host_async(void* destination, const void* source, std::size_t bytes,
                          stream_type& stream) {
    order_after_allocations(stream);
    cuda_device_resource::copy_to_host_async(destination, source, bytes, stream);
  }

  friend bool operator==(const cuda_async_device_resource&,
                         const cuda_async_device_resource&) = default;

 private:
  void copy_now(void* destination, const void* source, std::size_t bytes, cudaMemcpyKind kind) {
    cuda::scoped_device on(device_id());
    CREMA_CUDA_TRY(cudaMemcpyAsync(destination, source, bytes, kind, stream_));
    CREMA_CUDA_TRY(cudaStreamSynchronize(stream_));
  }
  void order_after_allocations(stream_type& stream) {
    if (stream.native_handle() == stream_) return;
    cuda_stream allocations = cuda_stream::wrap(stream_, device_id());
    const cuda_event allocated = allocations.record();
    CREMA_CUDA_TRY(cudaStreamWaitEvent(stream.native_handle(), allocated.native_handle(), 0));
  }

  cudaStream_t stream_;
};

static_assert(device_resource<cuda_async_device_resource>);

}  // namespace crema
