// What the CUDA peer-copy reducer (cuda_p2p_reducer) makes on each participant's device, on the
// counting runtime (counting_runtime.hpp) instead of libcudart, with several devices and without
// a GPU: a stream and two chunks on each participant's own device, peer access along the tree's
// edges, and, where a device refuses part way (memory, a stream, peer access), an error naming
// that device and nothing left behind.

#include <crema/collective/cuda/detail/peer_workspace.hpp>
#include <crema/collective/topology.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/core/error.hpp>

#include "counting_runtime.hpp"

#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace counting = crema::test::counting_cuda;
using counting::call;
using workspace = crema::cuda::detail::peer_workspace<float>;

// Devices 0 (root), 1 and 2 (its children) as participants 0, 1, 2; device 3 is left out.
crema::tree_topology root_and_two_children() {
  const std::array ids{0, 1, 2};
  return crema::tree_topology::flat(ids);
}

int device_of_memory(const void* pointer) {
  cudaPointerAttributes where{};
  REQUIRE(cudaPointerGetAttributes(&where, pointer) == cudaSuccess);
  REQUIRE(where.type == cudaMemoryTypeDevice);
  return where.device;
}

}  // namespace

TEST_SUITE("cuda_p2p_reducer's workspace, counted") {
  TEST_CASE("each participant's stream and chunks are on its own device, and are freed there") {
    const counting::devices_for_scope four_devices(4);
    const crema::tree_topology tree = root_and_two_children();
    const counting::held_objects held_before = counting::held();
    const auto before = counting::all_threads();
    const std::uint64_t misplaced_before = counting::calls_across_devices();
    {
      workspace made(tree, 1000);
      for (std::size_t i = 0; i < tree.size(); ++i) {
        CAPTURE(i);
        CHECK(counting::device_of(made.stream(i).native_handle()) == tree.id(i));
        CHECK(device_of_memory(made.staging(i)) == tree.id(i));
        CHECK(device_of_memory(made.partial(i)) == tree.id(i));
        CHECK(made.staging(i) != made.partial(i));
      }
      // Each chunk holds the elements asked for: the last one can be written.
      made.partial(2)[999] = 1.0F;
      made.staging(2)[999] = 2.0F;
      made.synchronize();
      CHECK(counting::current_device() == 0);
      const auto made_calls = counting::all_threads() - before;
      CHECK(made_calls[call::allocate] == 6);
      CHECK(made_calls[call::stream_create] == 3);
    }
    CHECK(counting::held() == held_before);
    CHECK(counting::current_device() == 0);
    CHECK(counting::calls_across_devices() == misplaced_before);
  }

  TEST_CASE("peer access is enabled both ways along the tree's edges, once, and only there") {
    const counting::devices_for_scope four_devices(4);
    const crema::tree_topology tree = root_and_two_children();
    {
      const workspace first(tree, 16);
      for (const int child : {1, 2}) {
        CAPTURE(child);
        CHECK(counting::peer_access_enabled(child, 0));
        CHECK(counting::peer_access_enabled(0, child));
      }
      CHECK_FALSE(counting::peer_access_enabled(1, 2));  // siblings: no edge between them
      CHECK_FALSE(counting::peer_access_enabled(2, 1));
      CHECK_FALSE(counting::peer_access_enabled(0, 3));  // not a participant
    }
    // Access stays enabled once the first is gone, as on a GPU: a second reducer over the same
    // devices (parameters, then gradients) meets "already enabled", and goes on with no error
    // left for the next call to find.
    const workspace second(tree, 16);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(counting::current_device() == 0);
  }

  TEST_CASE("devices that cannot reach each other's memory are left to copies through the host") {
    const counting::devices_for_scope apart(3, false);
    const auto before = counting::all_threads();
    const workspace made(root_and_two_children(), 16);
    CHECK_FALSE(counting::peer_access_enabled(1, 0));
    CHECK_FALSE(counting::peer_access_enabled(0, 1));
    CHECK((counting::all_threads() - before)[call::peer_access] == 2);  // asked, for each edge
    CHECK(cudaGetLastError() == cudaSuccess);
  }

  TEST_CASE("a device that refuses part way is named, and what was made before is freed") {
    struct refusal {
      const char* what;
      call kind;
      cudaError_t error;
      int device;
      const char* message;  // what the error's message starts with
    };
    // A chunk of 1000 floats: 4000 bytes.
    const std::array refusals{
        refusal{"memory, device 2's second chunk", call::allocate, cudaErrorMemoryAllocation, 2,
                "cannot allocate 4000 bytes of device memory: cudaErrorMemoryAllocation on "
                "device 2"},
        refusal{"memory, device 0's first chunk", call::allocate, cudaErrorMemoryAllocation, 0,
                "cannot allocate 4000 bytes of device memory: cudaErrorMemoryAllocation on "
                "device 0"},
        refusal{"device 1's stream", call::stream_create, cudaErrorInvalidValue, 1,
                "cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking) failed on device 1: "
                "cudaErrorInvalidValue"},
        refusal{"peer access from device 2", call::peer_access, cudaErrorInvalidValue, 2,
                "cudaDeviceCanAccessPeer(&can, device, peer) failed on device 2: "
                "cudaErrorInvalidValue"},
    };
    for (const refusal& refused : refusals) {
      const std::string what = refused.what;
      CAPTURE(what);
      const counting::devices_for_scope four_devices(4);
      const counting::held_objects held_before = counting::held();
      // Device 2's second allocation is its partial chunk, after its staging chunk; the others
      // fail at their first call of the kind on that device.
      const std::uint64_t after = refused.kind == call::allocate && refused.device == 2 ? 1 : 0;
      counting::fail_call(refused.kind, after, refused.error, false, refused.device);
      std::optional<std::string> error;
      try {
        const workspace made(root_and_two_children(), 1000);
      } catch (const crema::error& e) {
        error = e.what();
      }
      CHECK(counting::failed_calls() == 1);
      counting::heal();
      REQUIRE(error.has_value());
      CHECK(error->starts_with(refused.message));
      CHECK(counting::held() == held_before);
      CHECK(counting::current_device() == 0);
      CHECK(cudaGetLastError() == cudaSuccess);
    }
  }

  TEST_CASE("memory refused is an allocation_error that gives the bytes asked for") {
    const counting::devices_for_scope two_devices(2);
    const std::array ids{0, 1};
    counting::fail_call(call::allocate, 0, cudaErrorMemoryAllocation, false, 1);
    try {
      const workspace made(crema::tree_topology::flat(ids), 1 << 20);
      FAIL("the workspace was made on a device that refused its memory");
    } catch (const crema::allocation_error& e) {
      CHECK(e.bytes() == (std::size_t{1} << 20) * sizeof(float));
      CHECK(e.side() == "device");
    }
    counting::heal();
  }
}
