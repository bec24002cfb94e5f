// The soak (tests/common/soak.hpp) over crema's CUDA device batches: pipelines of random shapes,
// uploads on the consumer's stream, each batch's own or an uploader, stopped, destroyed under
// their consumers or run to the end of their pass, over a source and a transform that throw now
// and then. Each batch is read back with cudaMemcpy once a stream of its consumer's has waited
// for it, as a consumer's kernel would read it; every whole pass must be exact, and every
// pipeline must give back all the device memory its batches took.
//
// Built twice. Into crema_cuda_counting_tests, on the counting runtime (counting_runtime.hpp),
// which CI runs: the consumers on one device or on two, and a runtime that fails now and then
// (one call of a kind, or every call from it on, as after a kernel's fault). A failing runtime
// must fail the pipeline or the batch it hit, never hang, crash or hand over a batch that is not
// what was written; every pipeline must leave the runtime holding no more memory, streams or
// events than before it, and make no call that mixes devices. 10^6 records. And into
// crema_cuda_tests, against CUDA's runtime, which the GPU bundle runs (skipped without a device):
// on a GPU the uploads overlap stops and destructions, which the counting runtime, whose copies
// end at once, never makes happen. 2 x 10^5 records there (the bundle runs it four times: alone
// and under each of compute-sanitizer's tools, at its least). CREMA_SOAK_RECORDS for more.
#include <crema/core/cuda/cuda_try.hpp>
#include <crema/memory/cuda/cuda_device_resource.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/cuda/host_pinned_resource.hpp>
#include <crema/memory/limiting_resource_adaptor.hpp>
#include <crema/pipeline/device_batch.hpp>

#include "common/cuda_skip.hpp"
#include "common/soak.hpp"
#include "common/watchdog.hpp"

#ifdef CREMA_TEST_COUNTING_RUNTIME
#include "counting_soak_runtime.hpp"
#endif

#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#ifdef CREMA_TEST_COUNTING_RUNTIME
#define CREMA_SOAK_RUNTIME "the counting runtime failing now and then"
constexpr std::uint64_t soak_records = 1'000'000;
#else
#define CREMA_SOAK_RUNTIME "a GPU"
constexpr std::uint64_t soak_records = 200'000;
#endif

namespace {

using namespace crema::test::soaking;
using counted_device = crema::limiting_resource_adaptor<crema::cuda_device_resource>;
using gpu_batch = crema::device_batch<float, crema::host_pinned_resource, counted_device>;

// Consumer c's batches on device c modulo the devices: one GPU's solvers, or a node's, a GPU
// each. Each device's memory counted.
class consumer_devices {
 public:
  explicit consumer_devices(int count) {
    for (int device = 0; device < count; ++device) {
      devices_.emplace_back(crema::cuda_device_resource(device),
                            std::numeric_limits<std::size_t>::max());
    }
  }
  [[nodiscard]] counted_device resource(std::size_t consumer) const {
    return devices_.at(consumer % devices_.size());
  }
  [[nodiscard]] std::size_t allocated_bytes() const {
    std::size_t bytes = 0;
    for (const counted_device& device : devices_) bytes += device.allocated_bytes();
    return bytes;
  }

 private:
  std::vector<counted_device> devices_;
};

// A batch read back to the host after a stream of its consumer's device waited for its upload.
struct copied_first_pass {
  template <class Batch, class Visit>
  bool operator()(const Batch& batch, Visit&& visit) const {
    crema::cuda_stream compute(batch.stream().device_id());
    const auto on_device = batch.device(compute);  // compute waits for the upload
    const std::size_t elements = batch.shape().elements();
    std::vector<float> data(batch.size() * elements);
    std::vector<float> labels(batch.size());
    CREMA_CUDA_TRY(cudaMemcpyAsync(data.data(), on_device.data.data(), data.size() * sizeof(float),
                                   cudaMemcpyDeviceToHost, compute.native_handle()));
    CREMA_CUDA_TRY(cudaMemcpyAsync(labels.data(), on_device.labels.data(),
                                   labels.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                   compute.native_handle()));
    compute.synchronize();
    return visit_filled(data.data(), labels.data(), batch.size(), elements, visit);
  }
};

#ifndef CREMA_TEST_COUNTING_RUNTIME
// A GPU's runtime, as it is: one device (the bundle's machine has one), no failure made.
struct fault_tally {};
struct soak_runtime {
  soak_runtime(std::mt19937_64& /*draw*/, std::uint64_t /*latest_failure*/) {}
  [[nodiscard]] static int devices() noexcept { return 1; }
  void after(run_result& /*result*/, fault_tally& /*tally*/) {}
  bool left_behind = false;
  std::uint64_t mixed_devices = 0;
};
#endif

}  // namespace

TEST_CASE("soak on " CREMA_SOAK_RUNTIME
          ": pipelines of CUDA device batches stopped, destroyed and failing at random give back "
          "their memory, and every whole pass is exact") {
  if (crema::test::skip_without_cuda_device()) return;
  std::size_t leaks = 0;
  std::uint64_t mixed_devices = 0;
  fault_tally faults;
  soak(
      [&](std::mt19937_64& draw, ending how) {
        const crema::test::watchdog guard(std::chrono::seconds(60), "a CUDA soak's pipeline");
        soak_runtime runtime(draw, 200);
        const consumer_devices devices(runtime.devices());
        run_result result = device_run<gpu_batch>(
            draw, how, [&](std::size_t) { return &devices; }, copied_first_pass{});
        runtime.after(result, faults);
        leaks += devices.allocated_bytes() != 0 || runtime.left_behind ? 1 : 0;
        mixed_devices += runtime.mixed_devices;
        return result;
      },
      soak_records);
  CHECK(leaks == 0);
  CHECK(mixed_devices == 0);
#ifdef CREMA_TEST_COUNTING_RUNTIME
  MESSAGE(faults.faulty << " pipelines on a failing runtime, " << faults.failed_calls
                        << " calls failed");
  CHECK(faults.failed_calls > 0);
#endif
}
