#pragma once

#include <crema/collective/topology.hpp>
#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/memory/cuda/cuda_device_resource.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

namespace crema::cuda::detail {

/// @brief What the CUDA peer-copy reducer keeps on each participant's device: a stream, a
/// staging chunk (where a child's chunk arrives) and a partial chunk (its subtree's sum, for
/// `reduce`), with peer access enabled along the tree's edges where the devices allow it.
///
/// Made whole or not at all: a failure part way frees what was made before it, each chunk on its
/// own device, and throws: `crema::allocation_error` naming the bytes and the device where memory
/// is refused, `crema::cuda_error` naming the call and the device for the rest. The caller's
/// current device is the same after construction, failed or not, and after destruction.
/// Host code only, so that it runs on the counting runtime of the tests.
template <class T>
class peer_workspace {
 public:
  /// @param tree           participants numbered by device ordinal
  /// @param chunk_elements elements per chunk (at least one byte is allocated)
  peer_workspace(const tree_topology& tree, std::size_t chunk_elements) {
    devices_.reserve(tree.size());
    for (std::size_t i = 0; i < tree.size(); ++i) {
      devices_.emplace_back(tree.id(i), chunk_elements);
      if (const auto parent = tree.parent(i)) enable_peer_access(tree.id(i), tree.id(*parent));
    }
  }

  /// @return participant `i`'s stream
  [[nodiscard]] cuda_stream& stream(std::size_t i) noexcept { return devices_[i].stream; }
  /// @return participant `i`'s staging chunk: one chunk received from a child
  [[nodiscard]] T* staging(std::size_t i) const noexcept { return devices_[i].staging.data(); }
  /// @return participant `i`'s partial chunk: one chunk of its subtree's sum
  [[nodiscard]] T* partial(std::size_t i) const noexcept { return devices_[i].partial.data(); }

  /// @brief Blocks until every participant's stream has finished the work queued on it.
  void synchronize() {
    for (auto& on : devices_) on.stream.synchronize();
  }

 private:
  // One chunk of device memory, freed on its own device.
  class chunk {
   public:
    chunk(int device, std::size_t elements)
        : memory_(device),
          bytes_(std::max<std::size_t>(1, elements * sizeof(T))),
          data_(static_cast<T*>(memory_.allocate(bytes_, alignof(T)))) {}
    chunk(chunk&& other) noexcept
        : memory_(other.memory_),
          bytes_(other.bytes_),
          data_(std::exchange(other.data_, nullptr)) {}
    chunk& operator=(chunk&&) = delete;
    chunk(const chunk&) = delete;
    chunk& operator=(const chunk&) = delete;
    ~chunk() { memory_.deallocate(data_, bytes_, alignof(T)); }

    [[nodiscard]] T* data() const noexcept { return data_; }

   private:
    cuda_device_resource memory_;
    std::size_t bytes_;
    T* data_;
  };

  struct on_device {
    on_device(int device, std::size_t elements)
        : stream(device), staging(device, elements), partial(device, elements) {}

    cuda_stream stream;
    chunk staging;
    chunk partial;
  };

  // Lets `device` and `peer` read each other's memory where they can; where they cannot,
  // cudaMemcpyPeerAsync stages through the host.
  static void enable_peer_access(int device, int peer) {
    int can = 0;
    CREMA_CUDA_TRY_ON(device, cudaDeviceCanAccessPeer(&can, device, peer));
    if (can == 0) return;
    for (const auto& [from, to] : {std::pair{device, peer}, std::pair{peer, device}}) {
      const scoped_device on(from);
      const cudaError_t status = cudaDeviceEnablePeerAccess(to, 0);
      if (status == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();  // enabled before, by another reducer: not an error here
      } else {
        CREMA_CUDA_TRY(status);
      }
    }
  }

  std::vector<on_device> devices_;
};

}  // namespace crema::cuda::detail
