#pragma once

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/core/error.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/detail/alignment.hpp>
#include <crema/memory/resource.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>

namespace crema {

/// @brief Device memory from `cudaMalloc` on one device, with the copies between it and the host.
///
/// A handle: copies refer to the same device. Every call first makes the resource's device
/// current (and restores the caller's), so a buffer works from any thread. Allocation failures
/// throw `crema::allocation_error` naming the bytes, the side and the device; other CUDA failures
/// throw `crema::cuda_error` naming the call. Thread-safe as the CUDA runtime is.
class cuda_device_resource {
 public:
  using stream_type = cuda_stream;
  /// cudaMalloc aligns to 256 bytes; no larger alignment can be promised.
  static constexpr std::size_t max_alignment = 256;

  /// @brief Memory on the device current at construction.
  /// @throws crema::cuda_error if there is no usable device
  cuda_device_resource() : device_(cuda::current_device()) {}
  /// @brief Memory on device `device`.
  explicit cuda_device_resource(int device) noexcept : device_(device) {}

  /// @throws crema::allocation_error if the device cannot provide `bytes` bytes, or cannot be
  ///         made current (no device, no driver)
  [[nodiscard]] void* allocate(std::size_t bytes,
                               std::size_t alignment = alignof(std::max_align_t)) {
    return allocate_with(bytes, alignment, [](void** pointer, std::size_t size) {
      return cudaMalloc(pointer, size);
    });
  }
  /// @brief Frees what `allocate` returned.
  void deallocate(void* pointer, std::size_t /*bytes*/,
                  std::size_t /*alignment*/ = alignof(std::max_align_t)) noexcept {
    if (pointer == nullptr) return;
    int previous = device_;
    (void)cudaGetDevice(&previous);
    if (previous != device_) (void)cudaSetDevice(device_);
    (void)cudaFree(pointer);
    if (previous != device_) (void)cudaSetDevice(previous);
  }

  void fill_zero(void* destination, std::size_t bytes) {
    cuda::scoped_device on(device_);
    CREMA_CUDA_TRY(cudaMemset(destination, 0, bytes));
  }
  void copy_to_device(void* destination, const void* source, std::size_t bytes) {
    cuda::scoped_device on(device_);
    CREMA_CUDA_TRY(cudaMemcpy(destination, source, bytes, cudaMemcpyHostToDevice));
  }
  void copy_to_host(void* destination, const void* source, std::size_t bytes) {
    cuda::scoped_device on(device_);
    CREMA_CUDA_TRY(cudaMemcpy(destination, source, bytes, cudaMemcpyDeviceToHost));
  }
  void copy_to_device_async(void* destination, const void* source, std::size_t bytes,
                            stream_type& stream) {
    cuda::scoped_device on(device_);
    CREMA_CUDA_TRY(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyHostToDevice,
                                   stream.native_handle()));
  }
  void copy_to_host_async(void* destination, const void* source, std::size_t bytes,
                          stream_type& stream) {
    cuda::scoped_device on(device_);
    CREMA_CUDA_TRY(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDeviceToHost,
                                   stream.native_handle()));
  }

  /// @return the device this memory lives on
  [[nodiscard]] int device_id() const noexcept { return device_; }

  friend bool operator==(const cuda_device_resource&, const cuda_device_resource&) = default;

 protected:
  // Runs `malloc_call(&pointer, bytes)` on this resource's device. Every failure on the way,
  // making the device current included, becomes an allocation_error naming the device.
  template <class MallocCall>
  void* allocate_with(std::size_t bytes, std::size_t alignment, MallocCall malloc_call) const {
    detail::check_alignment(bytes, alignment, max_alignment, "device");
    int previous = 0;
    cudaError_t status = cudaGetDevice(&previous);
    const bool switch_device = status == cudaSuccess && previous != device_;
    if (switch_device) status = cudaSetDevice(device_);
    void* pointer = nullptr;
    if (status == cudaSuccess) status = malloc_call(&pointer, bytes);
    if (switch_device) (void)cudaSetDevice(previous);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      throw allocation_error(
          bytes, "device",
          crema::detail::format("{} on device {}", cudaGetErrorName(status), device_));
    }
    return pointer;
  }

 private:
  int device_;
};

static_assert(device_resource<cuda_device_resource>);

}  // namespace crema
