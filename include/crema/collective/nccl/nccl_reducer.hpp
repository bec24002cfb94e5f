#pragma once

#include <crema/collective/reduction.hpp>
#include <crema/collective/tree_collective.hpp>
#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/core/error.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/device_span.hpp>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <mutex>
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

/// @brief The NCCL model of `tree_collective`: one device buffer per GPU of this process, one
/// communicator per device (`ncclCommInitAll`), the calls grouped, `ncclAvg` for averages (NCCL
/// folds the 1/N into its last pass). Every operation blocks until done; operations serialize on
/// a mutex (they share the communicators and streams).
///
/// NCCL chooses its own rings and trees, so sums are NCCL's, not crema's tree order.
template <reducible T>
class nccl_reducer {
 public:
  using value_type = T;

  /// @param devices one device ordinal per participant
  /// @param buffers one device buffer per participant, on that device, all the same size
  /// @throws crema::collective_error on a count or size mismatch or an NCCL failure
  nccl_reducer(std::vector<int> devices, std::vector<device_span<T>> buffers)
      : devices_(std::move(devices)), buffers_(std::move(buffers)), comms_(devices_.size()) {
    crema::detail::check_buffers(name, buffers_, devices_.size());
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

  /// @return the number of participants
  [[nodiscard]] std::size_t participants() const noexcept { return devices_.size(); }
  /// @return the number of elements in each buffer
  [[nodiscard]] std::size_t size() const noexcept { return buffers_[0].size(); }

  void allreduce(reduction op = reduction::sum) {
    grouped([&](std::size_t i) {
      CREMA_NCCL_TRY(ncclAllReduce(buffers_[i].data(), buffers_[i].data(), buffers_[i].size(),
                                   detail::nccl_type<T>(), nccl_op(op), comms_[i],
                                   streams_[i].native_handle()));
    });
  }
  /// @brief The sum (or average) into `root`'s buffer; the others stay as they were (in-place
  /// `ncclReduce` reads them only).
  void reduce(std::size_t root, reduction op = reduction::sum) {
    reduce_range(root, 0, size(), op);
  }
  /// @brief `reduce` of elements [begin, end) only.
  void reduce_range(std::size_t root, std::size_t begin, std::size_t end,
                    reduction op = reduction::sum) {
    crema::detail::check_participant(name, "reduce_range", root, devices_.size());
    crema::detail::check_range(name, "reduce_range", begin, end, size());
    grouped([&](std::size_t i) {
      T* first = buffers_[i].data() + begin;
      CREMA_NCCL_TRY(ncclReduce(first, first, end - begin, detail::nccl_type<T>(), nccl_op(op),
                                static_cast<int>(root), comms_[i], streams_[i].native_handle()));
    });
  }
  void broadcast(std::size_t root) {
    crema::detail::check_participant(name, "broadcast", root, devices_.size());
    grouped([&](std::size_t i) {
      CREMA_NCCL_TRY(ncclBroadcast(buffers_[i].data(), buffers_[i].data(), buffers_[i].size(),
                                   detail::nccl_type<T>(), static_cast<int>(root), comms_[i],
                                   streams_[i].native_handle()));
    });
  }

 private:
  static ncclRedOp_t nccl_op(reduction op) { return op == reduction::average ? ncclAvg : ncclSum; }

  static constexpr const char* name = "nccl_reducer";

  template <class Call>
  void grouped(Call&& call) {
    std::scoped_lock lock(mutex_);
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
  std::mutex mutex_;
};

static_assert(tree_collective<nccl_reducer<float>>);

}  // namespace crema::cuda
