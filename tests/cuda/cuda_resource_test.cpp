// The CUDA resources, built with the host compiler against the CUDA runtime. Where there is no
// device the tests that need one say so and CTest reports them skipped; the failure paths that
// a machine without a GPU exercises for real are tested there instead.
#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/memory/cuda/cuda_async_device_resource.hpp>
#include <crema/memory/cuda/cuda_device_resource.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/cuda/host_pinned_resource.hpp>
#include <crema/memory/cuda/synced_buffer.hpp>

#include "common/resource_battery.hpp"

#include "common/cuda_skip.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

// Every member of the CUDA buffer compiles.
template class crema::synced_buffer<float, crema::host_pinned_resource,
                                    crema::cuda_device_resource>;
template class crema::synced_buffer<float, crema::host_pinned_resource,
                                    crema::cuda_async_device_resource>;

// Stream-ordered memory needs a stream that outlives every resource made here.
template <>
crema::cuda_async_device_resource crema::test::make_resource<crema::cuda_async_device_resource>() {
  static crema::cuda_stream allocations;
  return crema::cuda_async_device_resource(allocations);
}

TEST_SUITE("cuda resources") {
  TEST_CASE("the CUDA resources and stream model crema's concepts") {
    static_assert(crema::host_resource<crema::host_pinned_resource>);
    static_assert(crema::device_resource<crema::cuda_device_resource>);
    static_assert(crema::device_resource<crema::cuda_async_device_resource>);
    static_assert(crema::stream_policy<crema::cuda_stream>);
    static_assert(
        std::is_same_v<crema::cuda::synced_buffer<float>::stream_type, crema::cuda_stream>);
    CHECK(crema::cuda::device_count() >= 0);
  }

  TEST_CASE("CUDA resources refuse alignments they cannot honour before asking the driver") {
    crema::cuda_device_resource device(0);
    CHECK_THROWS_WITH_AS((void)device.allocate(64, 3),
                         "cannot allocate 64 bytes of device memory: alignment 3 is not a power "
                         "of two",
                         crema::allocation_error);
    CHECK_THROWS_WITH_AS((void)device.allocate(64, 512),
                         doctest::Contains("alignment 512 exceeds 256"), crema::allocation_error);
    crema::host_pinned_resource pinned;
    CHECK_THROWS_WITH_AS((void)pinned.allocate(64, 8192),
                         doctest::Contains("pinned host memory: alignment 8192 exceeds 4096"),
                         crema::allocation_error);
  }

  TEST_CASE("without a device, allocations throw allocation_error and never crash") {
    if (crema::cuda::device_count() > 0) {
      std::printf("crema-test-skip: a CUDA device is present; this tests the path without one\n");
      return;
    }
    crema::cuda_device_resource device(0);
    CHECK_THROWS_WITH_AS((void)device.allocate(1024),
                         doctest::Contains("cannot allocate 1024 bytes of device memory: cuda"),
                         crema::allocation_error);
    crema::host_pinned_resource pinned;
    CHECK_THROWS_WITH_AS((void)pinned.allocate(64),
                         doctest::Contains("cannot allocate 64 bytes of pinned host memory"),
                         crema::allocation_error);
    CHECK_THROWS_AS(crema::cuda_stream{}, crema::cuda_error);
    crema::synced_buffer<int, crema::host_malloc_resource, crema::cuda_device_resource> buffer(
        8, {}, crema::cuda_device_resource(0));
    buffer.mutable_host()[0] = 1;
    CHECK_THROWS_AS((void)buffer.device(), crema::allocation_error);
    CHECK(buffer.head() == crema::head::at_host);  // the failure changed nothing
    CHECK(buffer.host()[0] == 1);
  }

  TEST_CASE_TEMPLATE("a CUDA resource passes the conformance battery", Resource,
                     crema::host_pinned_resource, crema::cuda_device_resource,
                     crema::cuda_async_device_resource) {
    if (crema::test::skip_without_cuda_device()) return;
    auto resource = crema::test::make_resource<Resource>();
    crema::test::check_distinct_aligned_writable(resource);
    crema::test::check_zero_bytes(resource);
    if constexpr (crema::device_resource<Resource>) {
      CHECK(resource.device_id() == crema::cuda::current_device());
      crema::cuda_stream stream;
      crema::test::check_device_copies(resource, stream);
    }
  }

  TEST_CASE("a CUDA synced_buffer uploads asynchronously and is synced only after the copy") {
    if (crema::test::skip_without_cuda_device()) return;
    crema::cuda_stream stream;
    crema::cuda::synced_buffer<float> buffer(1 << 20);
    auto host = buffer.mutable_host();
    std::iota(host.begin(), host.end(), 0.0f);
    buffer.upload_async(stream);
    buffer.wait();
    CHECK(buffer.head() == crema::head::synced);
    (void)buffer.mutable_device();
    CHECK(buffer.host()[12345] == 12345.0f);
  }

  TEST_CASE(
      "a stream records its events again once they are given back, and a reused event "
      "stands for the work queued before its new record") {
    if (crema::test::skip_without_cuda_device()) return;
    crema::cuda_stream stream;
    cudaEvent_t first = nullptr;
    {
      const crema::cuda_event event = stream.record();
      first = event.native_handle();
      event.wait();
    }
    const crema::cuda_event again = stream.record();
    CHECK(again.native_handle() == first);
    const crema::cuda_event other = stream.record();  // the first is still held: a new one
    CHECK(other.native_handle() != first);
    // Each round copies a buffer up and back, waiting each time on an event recorded after the
    // copy (events the stream has used before): the host writes over its side only once the
    // upload is over, and reads the result only once the download is. An event that stood for
    // its earlier record would let the host overwrite the data mid-copy or read it too soon.
    constexpr std::size_t count = std::size_t{1} << 22;
    const auto free_host = [](float* p) { (void)cudaFreeHost(p); };
    const auto free_device = [](float* p) { (void)cudaFree(p); };
    void* raw = nullptr;
    CREMA_CUDA_TRY(cudaMallocHost(&raw, count * sizeof(float)));
    const std::unique_ptr<float, decltype(free_host)> host(static_cast<float*>(raw), free_host);
    CREMA_CUDA_TRY(cudaMalloc(&raw, count * sizeof(float)));
    const std::unique_ptr<float, decltype(free_device)> device(static_cast<float*>(raw),
                                                               free_device);
    for (int round = 1; round <= 3; ++round) {
      std::fill(host.get(), host.get() + count, static_cast<float>(round));
      CREMA_CUDA_TRY(cudaMemcpyAsync(device.get(), host.get(), count * sizeof(float),
                                     cudaMemcpyHostToDevice, stream.native_handle()));
      stream.record().wait();
      std::fill(host.get(), host.get() + count, -1.0f);
      CREMA_CUDA_TRY(cudaMemcpyAsync(host.get(), device.get(), count * sizeof(float),
                                     cudaMemcpyDeviceToHost, stream.native_handle()));
      const crema::cuda_event copied = stream.record();
      copied.wait();
      CHECK(copied.ready());
      CHECK(host.get()[0] == static_cast<float>(round));
      CHECK(host.get()[count - 1] == static_cast<float>(round));
    }
  }

  TEST_CASE("stream-ordered device memory works from its own stream and another") {
    if (crema::test::skip_without_cuda_device()) return;
    crema::cuda_stream allocations;
    crema::cuda_stream copies;
    crema::synced_buffer<float, crema::host_pinned_resource, crema::cuda_async_device_resource>
        buffer(4096, {}, crema::cuda_async_device_resource(allocations));
    std::ranges::fill(buffer.mutable_host(), 2.0f);
    buffer.upload_async(copies);
    (void)buffer.mutable_device();
    CHECK(buffer.host()[4095] == 2.0f);
  }
}

// The CUDA calls here fail on purpose. The GPU bundle's run.sh runs this suite under
// compute-sanitizer on its own, without the report of failed API calls (every other test must
// make none).
TEST_SUITE("cuda errors provoked on purpose") {
  TEST_CASE("a failing CUDA call throws cuda_error naming the call, the device and the error") {
    try {
      CREMA_CUDA_TRY(cudaSetDevice(-1));
      FAIL("cudaSetDevice(-1) succeeded");
    } catch (const crema::cuda_error& e) {
      const std::string message = e.what();
      // The device current when it failed, where there is one.
      const std::string where = crema::cuda::device_count() > 0 ? " on device 0" : "";
      CHECK(message.rfind("cudaSetDevice(-1) failed" + where + ": cudaError", 0) == 0);
      CHECK(e.code() != 0);
    }
  }

  TEST_CASE_TEMPLATE("a CUDA resource refuses what no device can give with allocation_error",
                     Resource, crema::host_pinned_resource, crema::cuda_device_resource,
                     crema::cuda_async_device_resource) {
    if (crema::test::skip_without_cuda_device()) return;
    auto resource = crema::test::make_resource<Resource>();
    crema::test::check_impossible_requests(resource);
  }
}
