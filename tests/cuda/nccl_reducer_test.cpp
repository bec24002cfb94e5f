// crema::cuda::nccl_reducer on four devices without a GPU: the fake NCCL (fake_nccl.hpp) and the
// counting CUDA runtime (counting_runtime.hpp) instead of libnccl and libcudart. What a user of
// the reducer relies on: the sums, averages, a root's reduce of a range and a broadcast that NCCL
// computes from the calls the reducer makes; and where NCCL or CUDA refuses, an error naming the
// call and the device, the reducer's group closed so that the next operation works, and nothing
// left behind by a construction that fails part way.

#include <crema/collective/nccl/nccl_reducer.hpp>
#include <crema/core/error.hpp>
#include <crema/memory/cuda/cuda_device_resource.hpp>

#include "counting_runtime.hpp"
#include "fake_nccl.hpp"

#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <cstddef>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace counting = crema::test::counting_cuda;
namespace fake = crema::test::fake_nccl;

constexpr std::size_t elements = 1000;

// One buffer of `elements` ints on each of `devices` devices of the counting runtime (device
// memory there is host memory, so the test reads it directly), participant p's element e equal
// to 1000 p + e.
class buffers_on_devices {
 public:
  explicit buffers_on_devices(int devices) {
    for (int device = 0; device < devices; ++device) {
      ids_.push_back(device);
      memory_.emplace_back(device);
      spans_.emplace_back(static_cast<int*>(memory_.back().allocate(elements * sizeof(int))),
                          elements);
    }
    refill();
  }
  buffers_on_devices(const buffers_on_devices&) = delete;
  buffers_on_devices& operator=(const buffers_on_devices&) = delete;
  ~buffers_on_devices() {
    for (std::size_t p = 0; p < spans_.size(); ++p) {
      memory_[p].deallocate(spans_[p].data(), elements * sizeof(int));
    }
  }

  void refill() {
    for (std::size_t p = 0; p < spans_.size(); ++p) {
      std::iota(spans_[p].data(), spans_[p].data() + elements, static_cast<int>(1000 * p));
    }
  }
  [[nodiscard]] int at(std::size_t participant, std::size_t e) const {
    return spans_[participant].data()[e];
  }
  [[nodiscard]] const std::vector<int>& ids() const { return ids_; }
  [[nodiscard]] const std::vector<crema::device_span<int>>& spans() const { return spans_; }
  [[nodiscard]] std::size_t size() const { return spans_.size(); }

 private:
  std::vector<int> ids_;
  std::vector<crema::cuda_device_resource> memory_;
  std::vector<crema::device_span<int>> spans_;
};

// The sum over participants of element e: 1000 (0 + 1 + ... + n-1) + n e.
int sum_at(std::size_t participants, std::size_t e) {
  const auto n = static_cast<int>(participants);
  return 1000 * n * (n - 1) / 2 + n * static_cast<int>(e);
}

// The message of the error `work` throws, if it throws one.
template <class Work>
std::optional<std::string> error_of(Work&& work) {
  try {
    work();
  } catch (const crema::error& e) {
    return e.what();
  }
  return std::nullopt;
}

}  // namespace

TEST_SUITE("nccl_reducer, on the fake NCCL") {
  TEST_CASE("sums, averages, reduces a range into a root and broadcasts across four devices") {
    const counting::devices_for_scope four_devices(4);
    buffers_on_devices buffers(4);
    crema::cuda::nccl_reducer<int> reducer(buffers.ids(), buffers.spans());
    CHECK(reducer.participants() == 4);

    reducer.allreduce();
    for (std::size_t p = 0; p < 4; ++p) {
      for (const std::size_t e : {0UL, 1UL, 999UL}) CHECK(buffers.at(p, e) == sum_at(4, e));
    }

    buffers.refill();
    reducer.allreduce(crema::reduction::average);
    for (std::size_t p = 0; p < 4; ++p) CHECK(buffers.at(p, 10) == sum_at(4, 10) / 4);

    // Only the root's elements [100, 200) take the sum; the rest of every buffer stays.
    buffers.refill();
    reducer.reduce_range(2, 100, 200);
    CHECK(buffers.at(2, 100) == sum_at(4, 100));
    CHECK(buffers.at(2, 199) == sum_at(4, 199));
    CHECK(buffers.at(2, 99) == 2000 + 99);
    CHECK(buffers.at(2, 200) == 2000 + 200);
    CHECK(buffers.at(1, 150) == 1000 + 150);

    buffers.refill();
    reducer.broadcast(3);
    for (std::size_t p = 0; p < 4; ++p) CHECK(buffers.at(p, 7) == 3000 + 7);
    CHECK(fake::group_depth() == 0);
  }

  TEST_CASE("a call NCCL refuses names its device, and the group is closed and the next works") {
    const counting::devices_for_scope four_devices(4);
    buffers_on_devices buffers(4);
    crema::cuda::nccl_reducer<int> reducer(buffers.ids(), buffers.spans());
    // The third participant's call, device 2's: the first two are queued in the group already.
    fake::fail_call(fake::call::collective, 2, ncclInvalidArgument);
    const std::optional<std::string> error = error_of([&] { reducer.allreduce(); });
    fake::heal();
    REQUIRE(error.has_value());
    CHECK(error->starts_with("ncclAllReduce("));
    CHECK(error->find("failed on device 2: invalid argument") != std::string::npos);
    CHECK(fake::group_depth() == 0);
    CHECK(buffers.at(0, 5) == 5);  // the failed group ran nothing
    CHECK(counting::current_device() == 0);

    reducer.allreduce();
    for (std::size_t p = 0; p < 4; ++p) CHECK(buffers.at(p, 5) == sum_at(4, 5));
  }

  TEST_CASE("a group NCCL fails at its end is an error, and the next operation works") {
    const counting::devices_for_scope two_devices(2);
    buffers_on_devices buffers(2);
    crema::cuda::nccl_reducer<int> reducer(buffers.ids(), buffers.spans());
    fake::fail_call(fake::call::group_end, 0, ncclSystemError);
    const std::optional<std::string> error = error_of([&] { reducer.broadcast(0); });
    fake::heal();
    REQUIRE(error.has_value());
    CHECK(*error == "ncclGroupEnd() failed: unhandled system error (fake NCCL)");
    CHECK(fake::group_depth() == 0);
    reducer.broadcast(0);
    CHECK(buffers.at(1, 3) == 3);
  }

  TEST_CASE("a construction that fails part way names the devices and leaves nothing behind") {
    const counting::devices_for_scope four_devices(4);
    buffers_on_devices buffers(4);
    const counting::held_objects held_before = counting::held();
    const std::size_t communicators_before = fake::live_communicators();

    // NCCL refuses the communicators.
    fake::fail_call(fake::call::comm_init_all, 0, ncclUnhandledCudaError);
    std::optional<std::string> error =
        error_of([&] { crema::cuda::nccl_reducer<int> reducer(buffers.ids(), buffers.spans()); });
    fake::heal();
    REQUIRE(error.has_value());
    CHECK(*error ==
          "ncclCommInitAll over devices 0, 1, 2, 3 failed: unhandled cuda error (fake NCCL)");

    // Device 3 refuses a stream once the communicators are made: they are destroyed.
    counting::fail_call(counting::call::stream_create, 0, cudaErrorInvalidValue, false, 3);
    error =
        error_of([&] { crema::cuda::nccl_reducer<int> reducer(buffers.ids(), buffers.spans()); });
    counting::heal();
    REQUIRE(error.has_value());
    CHECK(error->find("failed on device 3: cudaErrorInvalidValue") != std::string::npos);
    CHECK(fake::live_communicators() == communicators_before);
    CHECK(counting::held() == held_before);
    CHECK(counting::current_device() == 0);

    // A buffer count that does not match the devices: refused before NCCL is asked.
    const std::uint64_t inits = fake::calls(fake::call::comm_init_all);
    CHECK_THROWS_AS(crema::cuda::nccl_reducer<int>({0, 1, 2}, buffers.spans()),
                    crema::collective_error);
    CHECK(fake::calls(fake::call::comm_init_all) == inits);
  }
}
