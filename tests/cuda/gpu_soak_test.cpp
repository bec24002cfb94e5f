// The soak (tests/common/soak.hpp) over crema's CUDA device batches on a GPU: pipelines of random
// shapes, uploads on the consumer's stream, each batch's own or an uploader, stopped, destroyed
// under their consumers or run to the end of their pass, over a source and a transform that
// throw now and then. Each batch is read back with cudaMemcpy once its consumer's stream has
// waited for it, as a consumer's kernel would read it; every whole pass must be exact, and every
// pipeline must give back all the device memory its batches took. On a GPU the uploads overlap
// stops and destructions, which the counting runtime (cuda_soak_test.cpp), whose copies end at
// once, never makes happen.
//
// Built twice: into crema_cuda_tests, against CUDA's runtime (run by the GPU bundle; skipped
// without a device), and into crema_cuda_counting_tests, on the counting runtime, so that CI runs
// the test's own code. 2 x 10^5 records on a GPU (the bundle runs it four times: alone and under
// each of compute-sanitizer's tools), 10^5 on the counting runtime; CREMA_SOAK_RECORDS
// for more.
#include <crema/core/cuda/cuda_try.hpp>
#include <crema/memory/cuda/cuda_device_resource.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/cuda/host_pinned_resource.hpp>
#include <crema/memory/limiting_resource_adaptor.hpp>
#include <crema/pipeline/device_batch.hpp>

#include "common/cuda_skip.hpp"
#include "common/soak.hpp"
#include "common/watchdog.hpp"

#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#ifdef CREMA_TEST_COUNTING_RUNTIME
#define CREMA_SOAK_RUNTIME "the counting runtime"
constexpr std::uint64_t soak_records = 100'000;
#else
#define CREMA_SOAK_RUNTIME "a GPU"
constexpr std::uint64_t soak_records = 200'000;
#endif

namespace {

using namespace crema::test::soaking;
using counted_device = crema::limiting_resource_adaptor<crema::cuda_device_resource>;
using gpu_batch = crema::device_batch<float, crema::host_pinned_resource, counted_device>;

// Every consumer's batches on the current device, their memory counted.
struct current_device {
  counted_device device{{}, std::numeric_limits<std::size_t>::max()};
  [[nodiscard]] counted_device resource(std::size_t /*consumer*/) const { return device; }
};

// A batch read back to the host after a stream of the consumer's waited for its upload.
struct copied_first_pass {
  template <class Batch, class Visit>
  bool operator()(const Batch& batch, Visit&& visit) const {
    crema::cuda_stream compute;
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

}  // namespace

TEST_CASE("soak on " CREMA_SOAK_RUNTIME
          ": pipelines of CUDA device batches stopped, destroyed and failing at random give back "
          "their device memory, and every whole pass is exact") {
  if (crema::test::skip_without_cuda_device()) return;
  current_device device;
  std::size_t leaks = 0;
  soak(
      [&](std::mt19937_64& draw, ending how) {
        const crema::test::watchdog guard(std::chrono::seconds(60), "a GPU soak's pipeline");
        const run_result result = device_run<gpu_batch>(
            draw, how, [&](std::size_t) { return &device; }, copied_first_pass{});
        leaks += device.device.allocated_bytes() == 0 ? 0 : 1;
        return result;
      },
      soak_records);
  CHECK(leaks == 0);
}
