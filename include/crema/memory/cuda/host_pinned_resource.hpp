#pragma once

#include <crema/core/error.hpp>
#include <crema/memory/detail/alignment.hpp>
#include <crema/memory/resource.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>

namespace crema {

/// @brief Page-locked host memory from `cudaHostAlloc`: the host side that asynchronous copies
/// need to really overlap with compute.
///
/// Stateless. `allocate` is thread-safe and may block in the driver; it throws
/// `crema::allocation_error` naming the bytes, "pinned host" and the CUDA error when the driver
/// refuses (as it does on a machine without a GPU). `deallocate` never throws.
class host_pinned_resource {
 public:
  /// Pinned allocations are page aligned; no larger alignment can be promised.
  static constexpr std::size_t max_alignment = 4096;

  /// @throws crema::allocation_error if the driver cannot pin `bytes` bytes, or `alignment`
  ///         exceeds `max_alignment`
  [[nodiscard]] void* allocate(std::size_t bytes,
                               std::size_t alignment = alignof(std::max_align_t)) const {
    detail::check_alignment(bytes, alignment, max_alignment, "pinned host");
    void* pointer = nullptr;
    const cudaError_t status = cudaHostAlloc(&pointer, bytes, cudaHostAllocPortable);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      throw allocation_error(bytes, "pinned host", cudaGetErrorName(status));
    }
    return pointer;
  }
  /// @brief Frees what `allocate` returned.
  void deallocate(void* pointer, std::size_t /*bytes*/,
                  std::size_t /*alignment*/ = alignof(std::max_align_t)) const noexcept {
    if (pointer != nullptr) (void)cudaFreeHost(pointer);
  }
  friend bool operator==(const host_pinned_resource&, const host_pinned_resource&) = default;
};

static_assert(host_resource<host_pinned_resource>);

}  // namespace crema
