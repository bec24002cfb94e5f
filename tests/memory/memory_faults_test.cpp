// synced_buffer after an asynchronous copy fails: the failure is reported once, and the buffer
// is usable again, with the data it had.

#include <crema/memory/synced_buffer.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

TEST_SUITE("synced_buffer faults") {
  TEST_CASE(
      "a failed asynchronous upload is reported once, then the buffer works from the host "
      "copy it kept") {
    crema::emulated_device device;
    crema::synced_buffer<int> buffer(64, crema::host_malloc_resource{},
                                     crema::emulated_device_resource{device});
    auto host = buffer.mutable_host();
    std::fill(host.begin(), host.end(), 7);

    crema::emulated_stream broken(crema::emulated_stream::run_inline);
    broken.launch([] { throw std::runtime_error("device lost"); });
    buffer.upload_async(broken);

    CHECK_THROWS_WITH_AS(buffer.wait(), "device lost", std::runtime_error);  // once
    CHECK_FALSE(buffer.transfer_pending());
    CHECK(buffer.head() == crema::head::at_host);  // as before the copy
    const auto uploads_before = device.stats().uploads;
    (void)buffer.device();  // copies again, synchronously
    CHECK(device.stats().uploads == uploads_before + 1);
    CHECK(buffer.head() == crema::head::synced);
    const auto kept = buffer.host();
    CHECK(std::all_of(kept.begin(), kept.end(), [](int value) { return value == 7; }));
  }

  TEST_CASE("a failed asynchronous download is reported once by the next access") {
    crema::emulated_device device;
    crema::synced_buffer<int> buffer(16, crema::host_malloc_resource{},
                                     crema::emulated_device_resource{device});
    (void)buffer.mutable_device();  // the device is the head
    crema::emulated_stream broken(crema::emulated_stream::run_inline);
    broken.launch([] { throw std::runtime_error("link down"); });
    buffer.download_async(broken);
    CHECK_THROWS_WITH_AS((void)buffer.host(), "link down", std::runtime_error);
    CHECK(buffer.head() == crema::head::at_device);
    CHECK(buffer.host().size() == 16);  // the next read copies down normally
    CHECK(buffer.head() == crema::head::synced);
  }
}
