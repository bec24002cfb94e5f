#pragma once

#include <crema/collective/device_tree_reducer.hpp>
#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/core/error.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/device_span.hpp>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <type_traits>
#include <vector>

namespace crema::cuda {

namespace detail {

inline void nccl_check(ncclResult_t status, const char* call) {
  if (status != ncclSuccess) {
    crema::detail::fail<collective_error>("{} failed: {}", call, ncclGetErrorString(status));
  }
}

template <class T>
ncclDataType_t nccl_type() {
  if constexpr (std::is_same_v<T, float>) {
    return ncclFloat32;
  } else if constexpr (std::is_same_v<T, double>) {
    return ncclFloat64;
  } else if constexpr (std::is_same_v<T, int>) {
    return ncclInt32;
  } else {
    static_assert(std::is_same_v<T, float>, "crema: nccl_reducer supports float, double and int");
  }
}

}  // namespace detail

#define CREMA_NCCL_TRY(call) ::crema::cuda::detail::nccl_check((call), #call)

/// @brief Broadcast, reduce and allreduce over one device buffer per GPU of this process, through
/// NCCL: one communicator per device (`ncclCommInitAll`), the calls grouped, `ncclAvg` for
/// averages (NCCL folds the 1/N into its last pass). Blocks until done.
///
/// NCCL chooses its own rings and trees, so sums are NCCL's, not crema's tree order.
template <class T>
class nccl_reducer {
 public:
  /// @param devices one device ordinal per participant
  /// @param buffers one device buffer per participant, on that device, all the same size
  /// @throws crema::collective_error on a count or size mismatch or an NCCL failure
  nccl_reducer(std::vector<int> devices, std::vector<device_span<T>> buffers)
      : devices_(std::move(devices)), buffers_(std::move(buffers)), comms_(devices_.size()) {
    if (devices_.empty()) crema::detail::fail<collective_error>("nccl_reducer: no participants");
    crema::detail::check_buffers("nccl_reducer", buffers_, devices_.size());
    CREMA_NCCL_TRY(
        ncclCommInitAll(comms_.data(), static_cast<int>(devices_.size()), devices_.data()));
    for (const int device : devices_) {
      scoped_device on(device);
      streams_.emplace_back();
    }
  }
  nccl_reducer(const nccl_reducer&) = delete;
  nccl_reducer& operator=(const nccl_reducer&) = delete;
  ~nccl_reducer() {
    for (auto comm : comms_) {
      if (comm != nullptr) (void)ncclCommDestroy(comm);
    }
  }

  void allreduce(reduction op = reduction::sum) {
    grouped([&](std::size_t i) {
      CREMA_NCCL_TRY(ncclAllReduce(buffers_[i].data(), buffers_[i].data(), buffers_[i].size(),
                                   detail::nccl_type<T>(), nccl_op(op), comms_[i],
                                   streams_[i].native_handle()));
    });
  }
  void reduce(std::size_t root, reduction op = reduction::sum) {
    check_root("reduce", root);
    grouped([&](std::size_t i) {
      CREMA_NCCL_TRY(ncclReduce(buffers_[i].data(), buffers_[i].data(), buffers_[i].size(),
                                detail::nccl_type<T>(), nccl_op(op), static_cast<int>(root),
                                comms_[i], streams_[i].native_handle()));
    });
  }
  void broadcast(std::size_t root) {
    check_root("broadcast", root);
    grouped([&](std::size_t i) {
      CREMA_NCCL_TRY(ncclBroadcast(buffers_[i].data(), buffers_[i].data(), buffers_[i].size(),
                                   detail::nccl_type<T>(), static_cast<int>(root), comms_[i],
                                   streams_[i].native_handle()));
    });
  }

 private:
  static ncclRedOp_t nccl_op(reduction op) { return op == reduction::average ? ncclAvg : ncclSum; }

  void check_root(const char* call, std::size_t root) const {
    if (root >= devices_.size()) {
      crema::detail::fail<collective_error>("nccl_reducer::{}: participant {} is outside {}", call,
                                            root, devices_.size());
    }
  }

  template <class Call>
  void grouped(Call&& call) {
    CREMA_NCCL_TRY(ncclGroupStart());
    for (std::size_t i = 0; i < devices_.size(); ++i) {
      scoped_device on(devices_[i]);
      call(i);
    }
    CREMA_NCCL_TRY(ncclGroupEnd());
    for (auto& stream : streams_) stream.synchronize();
  }

  std::vector<int> devices_;
  std::vector<device_span<T>> buffers_;
  std::vector<ncclComm_t> comms_;
  std::vector<cuda_stream> streams_;
};

}  // namespace crema::cuda
