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
/// Every alignment up to `max_alignment` is honoured. The driver promises 256 bytes (it
/// sub-allocates small requests at that granularity, so a page is not promised); a larger
/// alignment is met by asking for a little more and aligning within it.
///
/// Stateless. `allocate` is thread-safe and may block in the driver; it throws
/// `crema::allocation_error` naming the bytes, "pinned host" and the CUDA error when the driver
/// refuses (as it does on a machine without a GPU). `deallocate` never throws.
class host_pinned_resource {
 public:
  /// The largest alignment `allocate` honours: a page.
  static constexpr std::size_t max_alignment = 4096;
  /// What `cudaHostAlloc` itself guarantees (the CUDA programming guide: every allocation
  /// routine of the driver and runtime aligns to at least 256 bytes).
  static constexpr std::size_t driver_alignment = 256;

  /// @throws crema::allocation_error if the driver cannot pin `bytes` bytes, or `alignment`
  ///         is not a power of two up to `max_alignment`
  [[nodiscard]] void* allocate(std::size_t bytes,
                               std::size_t alignment = alignof(std::max_align_t)) const {
    detail::check_alignment(bytes, alignment, max_alignment, "pinned host");
    return detail::allocate_over_aligned(
        bytes, alignment, driver_alignment, "pinned host", [](std::size_t size) {
          void* pointer = nullptr;
          const cudaError_t status = cudaHostAlloc(&pointer, size, cudaHostAllocPortable);
          if (status != cudaSuccess) {
            (void)cudaGetLastError();
            throw allocation_error(size, "pinned host", cudaGetErrorName(status));
          }
          return pointer;
        });
  }
  /// @brief Frees what `allocate` returned with the same `alignment`.
  void deallocate(void* pointer, std::size_t /*bytes*/,
                  std::size_t alignment = alignof(std::max_align_t)) const noexcept {
    if (pointer != nullptr) {
      (void)cudaFreeHost(detail::over_aligned_origin(pointer, alignment, driver_alignment));
    }
  }
  friend bool operator==(const host_pinned_resource&, const host_pinned_resource&) = default;
};

static_assert(host_resource<host_pinned_resource>);

}  // namespace crema
