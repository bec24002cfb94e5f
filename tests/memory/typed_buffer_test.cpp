#include <crema/memory/typed_buffer.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <numeric>
#include <type_traits>
#include <vector>

namespace {

using crema::emulated_device;
using crema::emulated_device_resource;
using crema::head;

template <head H>
using typed = crema::typed_buffer<float, H>;

}  // namespace

TEST_SUITE("typed_buffer") {
  TEST_CASE("each operation returns the buffer with the head the table gives") {
    typed<head::uninitialized> fresh(4);
    static_assert(std::is_same_v<decltype(std::move(fresh).to_host()), typed<head::at_host>>);
    static_assert(std::is_same_v<decltype(std::move(fresh).to_device()), typed<head::at_device>>);
    static_assert(std::is_same_v<decltype(std::declval<typed<head::at_host>>().to_device()),
                                 typed<head::synced>>);
    static_assert(std::is_same_v<decltype(std::declval<typed<head::at_device>>().to_host()),
                                 typed<head::synced>>);
    static_assert(std::is_same_v<decltype(std::declval<typed<head::synced>>().claim_device()),
                                 typed<head::at_device>>);
    static_assert(std::is_same_v<decltype(std::declval<typed<head::synced>>().claim_host()),
                                 typed<head::at_host>>);
    static_assert(typed<head::synced>::current_head == head::synced);
    CHECK(fresh.size() == 4);
  }

  TEST_CASE("a static flow fills, uploads, computes on the device and reads back") {
    emulated_device device;
    crema::emulated_stream stream;
    typed<head::uninitialized> fresh(8, {}, emulated_device_resource{device});

    auto at_host = std::move(fresh).claim_host();
    auto host = at_host.mutable_host();
    std::iota(host.begin(), host.end(), 0.0f);

    auto synced = std::move(at_host).upload_async(stream);
    CHECK(synced.device().size() == 8);  // waits for the upload

    auto at_device = std::move(synced).claim_device();
    auto on_device = at_device.mutable_device();
    std::for_each(on_device.data(), on_device.data() + 8, [](float& v) { v *= 2; });

    const auto back = std::move(at_device).to_host();
    CHECK(std::vector<float>(back.host().begin(), back.host().end()) ==
          std::vector<float>{0, 2, 4, 6, 8, 10, 12, 14});
    CHECK(device.stats().uploads == 1);
    CHECK(device.stats().downloads == 1);
  }

  TEST_CASE("the runtime and typed forms convert with one checked call and back for free") {
    crema::synced_buffer<float> runtime(4);
    std::ranges::fill(runtime.mutable_host(), 3.0f);
    const float* where = runtime.host().data();

    auto at_host = crema::as_typed<head::at_host>(std::move(runtime));
    CHECK(at_host.host().data() == where);

    auto back = std::move(at_host).untyped();
    CHECK(back.head() == head::at_host);
    CHECK(back.host().data() == where);

    CHECK_THROWS_WITH_AS(static_cast<void>(crema::as_typed<head::at_device>(std::move(back))),
                         "as_typed: expected head at_device, the buffer is at_host",
                         crema::state_error);
    CHECK(back.head() == head::at_host);  // a refused conversion leaves the buffer as it was
    CHECK(back.host()[0] == 3.0f);
  }

  TEST_CASE("as_typed waits for a pending copy before it checks the head") {
    crema::emulated_stream stream;
    crema::synced_buffer<float> runtime(1 << 16);
    (void)runtime.mutable_host();
    runtime.upload_async(stream);
    auto synced = crema::as_typed<head::synced>(std::move(runtime));
    CHECK(synced.device().size() == 1 << 16);
  }

  TEST_CASE("a typed buffer can borrow memory on either side") {
    std::vector<float> host_memory(3, 1.0f);
    std::vector<float> device_memory(3, 2.0f);
    auto at_host = typed<head::uninitialized>(3).borrow_host(host_memory);
    CHECK(at_host.host().data() == host_memory.data());
    auto at_device = std::move(at_host).borrow_device({device_memory.data(), 3});
    CHECK(at_device.device().data() == device_memory.data());
    crema::emulated_stream stream;
    auto synced = std::move(at_device).download_async(stream);
    CHECK(synced.host()[0] == 2.0f);
  }
}
