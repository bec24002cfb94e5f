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
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace crema::cuda {

namespace detail {

/// Throws `crema::collective_error` for a failed `status`: "<call> failed[ on device D]: <why>",
/// `call` the call's source text, D the device of the communicator it was made on.
inline void nccl_check(ncclResult_t status, const char* call, std::optional<int> device = {}) {
  if (status != ncclSuccess) [[unlikely]] {
    crema::detail::fail<collective_error>(
        "{} failed{}: {}", call, device ? crema::detail::format(" on device {}", *device) : "",
        ncclGetErrorString(status));
  }
}

/// @brief One communicator per device of this process (`ncclCommInitAll`), destroyed with the
/// object, also where the object that holds it fails to finish its construction.
class nccl_clique {
 public:
  /// @throws crema::collective_error naming the devices where NCCL refuses
  explicit nccl_clique(const std::vector<int>& devices) : comms_(devices.size(), nullptr) {
    const ncclResult_t status =
        ncclCommInitAll(comms_.data(), static_cast<int>(devices.size()), devices.data());
    if (status != ncclSuccess) {
      std::string listed;
      for (const int device : devices) {
        if (!listed.empty()) listed += ", ";
        listed += std::to_string(device);
      }
      crema::detail::fail<collective_error>("ncclCommInitAll over devices {} failed: {}", listed,
                                            ncclGetErrorString(status));
    }
  }
  nccl_clique(const nccl_clique&) = delete;
  nccl_clique& operator=(const nccl_clique&) = delete;
  ~nccl_clique() {
    for (ncclComm_t comm : comms_) {
      if (comm != nullptr) (void)ncclCommDestroy(comm);
    }
  }

  /// @return the communicator of participant `i`
  [[nodiscard]] ncclComm_t operator[](std::size_t i) const noexcept { return comms_[i]; }

 private:
  std::vector<ncclComm_t> comms_;
};

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
/// As `CREMA_NCCL_TRY`, for a call on the communicator of device `device`: the message names it.
#define CREMA_NCCL_TRY_ON(device, call) ::crema::cuda::detail::nccl_check((call), #call, (device))

/// @brief The NCCL model of `tree_collective`: one device buffer per GPU of this process, one
/// communicator per device (`ncclCommInitAll`), the calls grouped, `ncclAvg` for averages (NCCL
/// folds the 1/N into its last pass). Every operation blocks until done; operations serialize on
/// a mutex (they share the communicators and streams). A failure is a `crema::collective_error`
/// naming the call and the device it was made for; the group the operation opened is closed
/// before it is thrown, so the next operation starts clean.
///
/// NCCL chooses its own rings and trees, so sums are NCCL's, not crema's tree order.
template <reducible T>
class nccl_reducer {
 public:
  using value_type = T;

  /// @param devices one device ordinal per participant
  /// @param buffers one device buffer per participant, on that device, all the same size
  /// @throws crema::collective_error on a count or size mismatch or an NCCL failure;
  ///         crema::cuda_error where a device's stream cannot be made (naming the device). What
  ///         was made before a failure is destroyed.
  nccl_reducer(std::vector<int> devices, std::vector<device_span<T>> buffers)
      : devices_(std::move(devices)),
        buffers_(crema::detail::checked_buffers(name, std::move(buffers), devices_.size())),
        comms_(devices_) {
    streams_.reserve(devices_.size());
    for (const int device : devices_) streams_.emplace_back(device);
  }
  nccl_reducer(const nccl_reducer&) = delete;
  nccl_reducer& operator=(const nccl_reducer&) = delete;

  /// @return the number of participants
  [[nodiscard]] std::size_t participants() const noexcept { return devices_.size(); }
  /// @return the number of elements in each buffer
  [[nodiscard]] std::size_t size() const noexcept { return buffers_[0].size(); }

  void allreduce(reduction op = reduction::sum) {
    grouped([&](std::size_t i) {
      CREMA_NCCL_TRY_ON(devices_[i],
                        ncclAllReduce(buffers_[i].data(), buffers_[i].data(), buffers_[i].size(),
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
      CREMA_NCCL_TRY_ON(devices_[i],
                        ncclReduce(first, first, end - begin, detail::nccl_type<T>(), nccl_op(op),
                                   static_cast<int>(root), comms_[i], streams_[i].native_handle()));
    });
  }
  void broadcast(std::size_t root) {
    crema::detail::check_participant(name, "broadcast", root, devices_.size());
    grouped([&](std::size_t i) {
      CREMA_NCCL_TRY_ON(devices_[i],
                        ncclBroadcast(buffers_[i].data(), buffers_[i].data(), buffers_[i].size(),
                                      detail::nccl_type<T>(), static_cast<int>(root), comms_[i],
                                      streams_[i].native_handle()));
    });
  }

 private:
  static ncclRedOp_t nccl_op(reduction op) { return op == reduction::average ? ncclAvg : ncclSum; }

  static constexpr const char* name = "nccl_reducer";

  // Makes `call(i)` for every participant inside one NCCL group. A call that throws ends the
  // group first: a group left open would swallow the next operation's calls into it.
  template <class Call>
  void grouped(Call&& call) {
    std::scoped_lock lock(mutex_);
    CREMA_NCCL_TRY(ncclGroupStart());
    try {
      for (std::size_t i = 0; i < devices_.size(); ++i) {
        scoped_device on(devices_[i]);
        call(i);
      }
    } catch (...) {
      (void)ncclGroupEnd();  // the first failure is the one reported
      throw;
    }
    CREMA_NCCL_TRY(ncclGroupEnd());
    for (auto& stream : streams_) stream.synchronize();
  }

  std::vector<int> devices_;
  std::vector<device_span<T>> buffers_;
  detail::nccl_clique comms_;
  std::vector<cuda_stream> streams_;
  std::mutex mutex_;
};

static_assert(tree_collective<nccl_reducer<float>>);

}  // namespace crema::cuda
