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

/// @brief A standard allocator of page-locked host memory (`host_pinned_resource`): a
/// `std::vector<T, pinned_allocator<T>>` is a host buffer that asynchronous copies, and libraries
/// that copy from the host themselves (nvJPEG's hardware engine reads its input so), read with
/// DMA instead of through the driver's pageable staging. Growing one pins new memory and
/// `cudaFreeHost`s the old, which may wait for the device: reserve it once where it matters.
template <class T>
struct pinned_allocator {
  using value_type = T;

  pinned_allocator() noexcept = default;
  // Rebinding, implicit as the standard's allocators'.
  template <class U>
  pinned_allocator(const pinned_allocator<U>& /*other*/) noexcept {}

  /// @throws crema::allocation_error if the driver cannot pin `n` values
  [[nodiscard]] T* allocate(std::size_t n) const {
    return static_cast<T*>(host_pinned_resource{}.allocate(n * sizeof(T), alignof(T)));
  }
  void deallocate(T* pointer, std::size_t n) const noexcept {
    host_pinned_resource{}.deallocate(pointer, n * sizeof(T), alignof(T));
  }
  template <class U>
  friend bool operator==(const pinned_allocator&, const pinned_allocator<U>&) noexcept {
    return true;
  }
};

}  // namespace crema
