#include <crema/memory/emulated_device_resource.hpp>
#include <crema/memory/detail/alignment.hpp>
#include <crema/memory/host_malloc_resource.hpp>
#include <crema/memory/limiting_resource_adaptor.hpp>

#include "common/resource_battery.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

// Every member compiles for every adaptor instantiation.
template class crema::limiting_resource_adaptor<crema::host_malloc_resource>;
template class crema::limiting_resource_adaptor<crema::emulated_device_resource>;

using host_limited = crema::limiting_resource_adaptor<crema::host_malloc_resource>;
using device_limited = crema::limiting_resource_adaptor<crema::emulated_device_resource>;

// Adaptors get a budget larger than anything the battery asks for; their refusals are tested on
// their own below.
template <>
host_limited crema::test::make_resource<host_limited>() {
  return host_limited(crema::host_malloc_resource{}, std::size_t{1} << 30);
}
template <>
device_limited crema::test::make_resource<device_limited>() {
  return device_limited(crema::emulated_device_resource{}, std::size_t{1} << 30);
}

#define CREMA_CORE_RESOURCES \
  crema::host_malloc_resource, crema::emulated_device_resource, host_limited, device_limited

TEST_SUITE("resource conformance") {
  TEST_CASE_TEMPLATE("a resource hands out distinct, aligned, writable memory and takes it back",
                     Resource, CREMA_CORE_RESOURCES) {
    auto resource = crema::test::make_resource<Resource>();
    crema::test::check_distinct_aligned_writable(resource);
  }

  TEST_CASE_TEMPLATE("a resource accepts a zero-byte request", Resource, CREMA_CORE_RESOURCES) {
    auto resource = crema::test::make_resource<Resource>();
    crema::test::check_zero_bytes(resource);
  }

  TEST_CASE_TEMPLATE("an impossible request is an allocation_error that names the bytes", Resource,
                     CREMA_CORE_RESOURCES) {
    auto resource = crema::test::make_resource<Resource>();
    crema::test::check_impossible_requests(resource);
  }

  TEST_CASE_TEMPLATE("a device resource copies both ways and fills zeros", Resource,
                     crema::emulated_device_resource, device_limited) {
    auto resource = crema::test::make_resource<Resource>();
    CHECK(resource.device_id() == 0);
    crema::emulated_stream stream;
    crema::test::check_device_copies(resource, stream);
  }
}

TEST_SUITE("emulated_device_resource") {
  TEST_CASE("an emulated device counts every allocation and transfer") {
    crema::emulated_device device(2);
    crema::emulated_device_resource resource(device);
    CHECK(resource.device_id() == 2);
    std::vector<char> host(100);
    void* a = resource.allocate(100);
    resource.copy_to_device(a, host.data(), 100);
    resource.copy_to_device(a, host.data(), 50);
    resource.copy_to_host(host.data(), a, 100);
    resource.fill_zero(a, 100);
    auto stats = device.stats();
    CHECK(stats.allocations == 1);
    CHECK(stats.live_bytes == 100);
    CHECK(stats.uploads == 2);
    CHECK(stats.bytes_uploaded == 150);
    CHECK(stats.downloads == 1);
    CHECK(stats.bytes_downloaded == 100);
    CHECK(stats.zero_fills == 1);
    resource.deallocate(a, 100);
    CHECK(device.stats().live_bytes == 0);
    CHECK(device.stats().deallocations == 1);
    device.reset_stats();
    CHECK(device.stats() == crema::emulated_device_stats{});
  }

  TEST_CASE("copies of a resource share its device") {
    crema::emulated_device device;
    const crema::emulated_device_resource original(device);
    crema::emulated_device_resource copy = original;
    CHECK(copy == original);
    CHECK(&copy.device() == &device);
    CHECK(crema::emulated_device_resource{} != original);
  }
}

TEST_SUITE("limiting_resource_adaptor") {
  TEST_CASE("allocations past the budget are refused and the count is kept exact") {
    host_limited limited(crema::host_malloc_resource{}, 100);
    void* a = limited.allocate(60);
    CHECK(limited.allocated_bytes() == 60);
    CHECK_THROWS_WITH_AS((void)limited.allocate(41),
                         "cannot allocate 41 bytes of host memory: limit of 100 bytes, 60 in use",
                         crema::allocation_error);
    CHECK(limited.allocated_bytes() == 60);
    void* b = limited.allocate(40);  // exactly the budget
    CHECK(limited.allocated_bytes() == 100);
    limited.deallocate(a, 60);
    limited.deallocate(b, 40);
    CHECK(limited.allocated_bytes() == 0);
    CHECK(limited.limit() == 100);
  }

  TEST_CASE("copies of an adaptor share one budget") {
    device_limited first(crema::emulated_device_resource{}, 64);
    device_limited second = first;
    void* a = first.allocate(64);
    CHECK_THROWS_WITH_AS((void)second.allocate(1), doctest::Contains("of device memory"),
                         crema::allocation_error);
    second.deallocate(a, 64);
    CHECK(first.allocated_bytes() == 0);
  }

  TEST_CASE("an upstream failure gives the bytes back to the budget") {
    host_limited limited(crema::host_malloc_resource{}, std::numeric_limits<std::size_t>::max());
    CHECK_THROWS_AS((void)limited.allocate(std::numeric_limits<std::size_t>::max() / 2),
                    crema::allocation_error);
    CHECK(limited.allocated_bytes() == 0);
  }
}

TEST_SUITE("over-aligned allocation") {
  TEST_CASE("an allocator that promises less alignment than asked gets every alignment honoured, "
            "and its own pointer back") {
    // malloc promises 16 bytes here; pretend it promises 256, as cudaHostAlloc does, and ask for
    // up to a page, as host_pinned_resource advertises.
    constexpr std::size_t native = 256;
    std::vector<void*> origins;
    const auto allocate = [&](std::size_t size) {
      void* origin = std::malloc(size);
      REQUIRE(origin != nullptr);
      origins.push_back(origin);
      return origin;
    };
    for (const std::size_t alignment : {1U, 16U, 256U, 512U, 1024U, 4096U}) {
      for (const std::size_t bytes : {0U, 1U, 7U, 64U, 1000U, 5000U}) {
        CAPTURE(alignment);
        CAPTURE(bytes);
        origins.clear();
        void* block =
            crema::detail::allocate_over_aligned(bytes, alignment, native, "test", allocate);
        REQUIRE(origins.size() == 1);
        if (alignment > native) {  // below that the allocator's own promise stands (not malloc's)
          CHECK(reinterpret_cast<std::uintptr_t>(block) % alignment == 0);
        }
        std::memset(block, 0xab, bytes);  // every byte asked for is usable (ASan checks)
        void* origin = crema::detail::over_aligned_origin(block, alignment, native);
        CHECK(origin == origins.front());
        std::free(origin);
      }
    }
    CHECK_THROWS_AS((void)crema::detail::allocate_over_aligned(static_cast<std::size_t>(-1),
                                                               4096, native, "test", allocate),
                    crema::allocation_error);
  }
}
