#include <crema/memory/emulated_device_resource.hpp>
#include <crema/memory/host_malloc_resource.hpp>
#include <crema/memory/limiting_resource_adaptor.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <vector>

// Every member compiles for every adaptor instantiation.
template class crema::limiting_resource_adaptor<crema::host_malloc_resource>;
template class crema::limiting_resource_adaptor<crema::emulated_device_resource>;

namespace {

using host_limited = crema::limiting_resource_adaptor<crema::host_malloc_resource>;
using device_limited = crema::limiting_resource_adaptor<crema::emulated_device_resource>;

// How each resource under test is made: plain ones by default construction, adaptors with a
// budget larger than anything the battery asks for (its refusals are tested on their own).
template <class Resource>
Resource make_resource() {
  if constexpr (std::is_same_v<Resource, host_limited>) {
    return host_limited(crema::host_malloc_resource{}, std::size_t{1} << 30);
  } else if constexpr (std::is_same_v<Resource, device_limited>) {
    return device_limited(crema::emulated_device_resource{}, std::size_t{1} << 30);
  } else {
    return Resource{};
  }
}

bool aligned(const void* pointer, std::size_t alignment) {
  return reinterpret_cast<std::uintptr_t>(pointer) % alignment == 0;
}

}  // namespace

TEST_SUITE("resource conformance") {
  TEST_CASE_TEMPLATE("a resource hands out distinct, aligned, writable memory and takes it back",
                     Resource, crema::host_malloc_resource, crema::emulated_device_resource,
                     host_limited, device_limited) {
    Resource resource = make_resource<Resource>();
    std::set<void*> seen;
    std::vector<std::pair<void*, std::size_t>> live;
    for (const std::size_t alignment : {1U, 8U, 16U, 64U, 256U, 4096U}) {
      for (const std::size_t bytes : {1U, 7U, 64U, 1000U, 65536U}) {
        void* pointer = resource.allocate(bytes, alignment);
        REQUIRE(pointer != nullptr);
        CHECK(aligned(pointer, alignment));
        CHECK(seen.insert(pointer).second);
        std::memset(pointer, 0xAB, bytes);  // ASan checks every byte is ours
        live.emplace_back(pointer, bytes);
      }
      for (auto [pointer, bytes] : live) resource.deallocate(pointer, bytes, alignment);
      live.clear();
      seen.clear();
    }
  }

  TEST_CASE_TEMPLATE("a resource accepts a zero-byte request", Resource,
                     crema::host_malloc_resource, crema::emulated_device_resource, host_limited,
                     device_limited) {
    Resource resource = make_resource<Resource>();
    void* pointer = resource.allocate(0, 8);
    resource.deallocate(pointer, 0, 8);
  }

  TEST_CASE_TEMPLATE("an impossible request is an allocation_error that names the bytes",
                     Resource, crema::host_malloc_resource, crema::emulated_device_resource,
                     host_limited, device_limited) {
    Resource resource = make_resource<Resource>();
    // More than any machine has (the allocator refuses), and more than any object may be.
    for (const std::size_t huge : {std::size_t{1} << 62, std::numeric_limits<std::size_t>::max()}) {
      try {
        (void)resource.allocate(huge, 64);
        FAIL("expected an allocation_error");
      } catch (const crema::allocation_error& e) {
        CHECK(e.bytes() == huge);
        CHECK(std::string(e.what()).find(std::to_string(huge)) != std::string::npos);
      }
    }
    CHECK_THROWS_AS((void)resource.allocate(64, 3), crema::allocation_error);  // not a power of 2
  }

  TEST_CASE_TEMPLATE("a device resource copies both ways, fills zeros and names its device",
                     Resource, crema::emulated_device_resource, device_limited) {
    Resource resource = make_resource<Resource>();
    CHECK(resource.device_id() == 0);
    std::vector<int> source{1, 2, 3, 4};
    std::vector<int> back(4, -1);
    void* on_device = resource.allocate(sizeof(int) * 4, alignof(int));
    resource.copy_to_device(on_device, source.data(), sizeof(int) * 4);
    resource.copy_to_host(back.data(), on_device, sizeof(int) * 4);
    CHECK(back == source);

    resource.fill_zero(on_device, sizeof(int) * 4);
    resource.copy_to_host(back.data(), on_device, sizeof(int) * 4);
    CHECK(back == std::vector<int>(4, 0));

    crema::emulated_stream stream;
    resource.copy_to_device_async(on_device, source.data(), sizeof(int) * 4, stream);
    resource.copy_to_host_async(back.data(), on_device, sizeof(int) * 4, stream);
    stream.synchronize();
    CHECK(back == source);
    resource.deallocate(on_device, sizeof(int) * 4, alignof(int));
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
