#pragma once

// The conformance battery every memory resource passes. Each test file runs it over its models
// with TEST_CASE_TEMPLATE; a resource is made by crema::test::make_resource<Resource>(), which a
// test file specializes for models that need arguments.

#include <crema/core/error.hpp>
#include <crema/memory/resource.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace crema::test {

template <class Resource>
Resource make_resource() {
  return Resource{};
}

// Alignments up to the largest a resource promises (4096 where it does not say).
template <class Resource>
std::vector<std::size_t> alignments_for() {
  std::size_t largest = 4096;
  if constexpr (requires { Resource::max_alignment; }) largest = Resource::max_alignment;
  std::vector<std::size_t> alignments;
  for (std::size_t a = 1; a <= largest; a *= 4) alignments.push_back(a);
  return alignments;
}

// Writes `bytes` bytes of `pattern` into memory from `resource`, the way its side allows, and
// checks they read back.
template <class Resource>
void write_and_check(Resource& resource, void* pointer, std::size_t bytes, unsigned char pattern) {
  std::vector<unsigned char> expected(bytes, pattern);
  if constexpr (device_resource<Resource>) {
    std::vector<unsigned char> back(bytes, static_cast<unsigned char>(~pattern));
    resource.copy_to_device(pointer, expected.data(), bytes);
    resource.copy_to_host(back.data(), pointer, bytes);
    CHECK(back == expected);
  } else {
    std::memset(pointer, pattern, bytes);  // under ASan, every byte must be ours
    CHECK(std::memcmp(pointer, expected.data(), bytes) == 0);
  }
}

template <class Resource>
void check_distinct_aligned_writable(Resource& resource) {
  for (const std::size_t alignment : alignments_for<Resource>()) {
    std::set<void*> seen;
    std::vector<std::pair<void*, std::size_t>> live;
    for (const std::size_t bytes : {1U, 7U, 64U, 1000U, 65536U}) {
      void* pointer = resource.allocate(bytes, alignment);
      REQUIRE(pointer != nullptr);
      CHECK(reinterpret_cast<std::uintptr_t>(pointer) % alignment == 0);
      CHECK(seen.insert(pointer).second);
      write_and_check(resource, pointer, bytes, static_cast<unsigned char>(bytes));
      live.emplace_back(pointer, bytes);
    }
    for (auto [pointer, bytes] : live) resource.deallocate(pointer, bytes, alignment);
  }
}

template <class Resource>
void check_zero_bytes(Resource& resource) {
  void* pointer = resource.allocate(0, 8);
  resource.deallocate(pointer, 0, 8);
}

template <class Resource>
void check_impossible_requests(Resource& resource) {
  // More than any machine has (the allocator refuses), and more than any object may be.
  for (const std::size_t huge : {std::size_t{1} << 62, std::numeric_limits<std::size_t>::max()}) {
    try {
      (void)resource.allocate(huge, 64);
      FAIL("expected an allocation_error");
    } catch (const allocation_error& e) {
      CHECK(e.bytes() == huge);
      CHECK(std::string(e.what()).find(std::to_string(huge)) != std::string::npos);
    }
  }
  CHECK_THROWS_AS((void)resource.allocate(64, 3), allocation_error);  // not a power of two
}

template <device_resource Resource>
void check_device_copies(Resource& resource, typename Resource::stream_type& stream) {
  const std::vector<int> source{1, 2, 3, 4};
  std::vector<int> back(4, -1);
  constexpr std::size_t bytes = sizeof(int) * 4;
  void* on_device = resource.allocate(bytes, alignof(int));
  resource.copy_to_device(on_device, source.data(), bytes);
  resource.copy_to_host(back.data(), on_device, bytes);
  CHECK(back == source);

  resource.fill_zero(on_device, bytes);
  resource.copy_to_host(back.data(), on_device, bytes);
  CHECK(back == std::vector<int>(4, 0));

  resource.copy_to_device_async(on_device, source.data(), bytes, stream);
  resource.copy_to_host_async(back.data(), on_device, bytes, stream);
  stream.synchronize();
  CHECK(back == source);
  resource.deallocate(on_device, bytes, alignof(int));
}

}  // namespace crema::test
