#pragma once

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/memory/cuda/cuda_device_resource.hpp>
#include <crema/memory/cuda/host_pinned_resource.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>

namespace crema::detail {

// Bytes on the current device or pinned on the host, grown, never shrunk. Memory refused is an
// allocation_error naming the bytes, the side (and the device).
class gpu_bytes {
 public:
  explicit gpu_bytes(bool pinned = false) noexcept : pinned_(pinned) {}
  gpu_bytes(const gpu_bytes&) = delete;
  gpu_bytes& operator=(const gpu_bytes&) = delete;
  ~gpu_bytes() { release(); }

  // At least `bytes`; what they held is lost. Only while no work queued reads or writes them.
  void reserve(std::size_t bytes) {
    if (bytes <= size_) return;
    const std::size_t size = std::max(bytes, size_ + size_ / 4);
    release();
    if (pinned_) {
      data_ = host_pinned_resource{}.allocate(size, aligned);
    } else {
      device_ = ::crema::cuda::current_device();
      data_ = cuda_device_resource(device_).allocate(size, aligned);
    }
    size_ = size;
  }
  void release() noexcept {
    if (data_ == nullptr) return;
    if (pinned_) {
      host_pinned_resource{}.deallocate(data_, size_, aligned);
    } else {
      cuda_device_resource(device_).deallocate(data_, size_, aligned);
    }
    data_ = nullptr;
    size_ = 0;
  }
  [[nodiscard]] void* data() const noexcept { return data_; }
  [[nodiscard]] std::byte* bytes() const noexcept { return static_cast<std::byte*>(data_); }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }

 private:
  static constexpr std::size_t aligned = cuda_device_resource::max_alignment;

  void* data_ = nullptr;
  std::size_t size_ = 0;
  bool pinned_;
  int device_ = 0;  // where data_ is, if not pinned
};

// Samples decoded on the host, uploaded on `stream` to their places in `out`: `from`'s k-th
// sample (of `sample` values) is image `images[k]`'s, in order; one copy a run of consecutive
// images.
template <class T>
void upload_samples(std::span<const std::size_t> images, const T* from, T* out, std::size_t sample,
                    cudaStream_t stream) {
  for (std::size_t k = 0; k < images.size();) {
    std::size_t run = 1;
    while (k + run < images.size() && images[k + run] == images[k] + run) ++run;
    CREMA_CUDA_TRY(cudaMemcpyAsync(out + images[k] * sample, from + k * sample,
                                   run * sample * sizeof(T), cudaMemcpyHostToDevice, stream));
    k += run;
  }
}

}  // namespace crema::detail
