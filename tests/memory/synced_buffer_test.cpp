#include <crema/memory/limiting_resource_adaptor.hpp>
#include <crema/memory/synced_buffer.hpp>

#include "common/counting_resource.hpp"
#include "common/gate.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

// Every member compiles for the default policies.
template class crema::synced_buffer<float>;

namespace {

using crema::emulated_device;
using crema::emulated_device_resource;
using crema::head;
using crema::host_malloc_resource;
using crema::operation;

using buffer = crema::synced_buffer<float>;

// Device memory of the emulated device is host memory, so tests may look at it directly.
template <class T>
std::vector<std::remove_const_t<T>> device_contents(crema::device_span<T> span) {
  return {span.data(), span.data() + span.size()};
}

bool all_zero(auto range) {
  return std::all_of(range.begin(), range.end(), [](auto value) { return value == 0; });
}

// Brings a fresh buffer on `device` to `state` through the runtime API.
buffer make_in_state(head state, emulated_device& device, std::size_t count = 16) {
  buffer b(count, {}, emulated_device_resource{device});
  switch (state) {
    case head::uninitialized:
      break;
    case head::at_host:
      (void)b.mutable_host();
      break;
    case head::at_device:
      (void)b.mutable_device();
      break;
    case head::synced:
      (void)b.mutable_host();
      (void)b.device();
      break;
  }
  REQUIRE(b.head() == state);
  return b;
}

void apply(buffer& b, operation op, std::vector<float>& borrowed_host,
           std::vector<float>& borrowed_device) {
  switch (op) {
    case operation::read_host:
      (void)b.host();
      break;
    case operation::write_host:
      (void)b.mutable_host();
      break;
    case operation::read_device:
      (void)b.device();
      break;
    case operation::write_device:
      (void)b.mutable_device();
      break;
    case operation::borrow_host:
      b.set_host_data(borrowed_host);
      break;
    case operation::borrow_device:
      b.set_device_data({borrowed_device.data(), borrowed_device.size()});
      break;
    default:
      FAIL("not a synchronous operation");
  }
}

}  // namespace

TEST_SUITE("synced_buffer") {
  TEST_CASE("a new buffer is uninitialized and allocates nothing") {
    emulated_device device;
    crema::test::counting_host_resource host;
    crema::synced_buffer<float, crema::test::counting_host_resource> b(
        1000, host, emulated_device_resource{device});
    CHECK(b.head() == head::uninitialized);
    CHECK(b.size() == 1000);
    CHECK(b.size_bytes() == 4000);
    CHECK(host.allocations() == 0);
    CHECK(device.stats() == crema::emulated_device_stats{});
  }

  TEST_CASE("the first host touch allocates the host side only and fills it with zeros") {
    emulated_device device;
    buffer b(64, {}, emulated_device_resource{device});
    const auto data = b.host();
    CHECK(data.size() == 64);
    CHECK(all_zero(data));
    CHECK(b.head() == head::at_host);
    CHECK(device.stats().allocations == 0);
  }

  TEST_CASE("the first device touch allocates the device side only and fills it with zeros") {
    emulated_device device;
    crema::test::counting_host_resource host;
    crema::synced_buffer<float, crema::test::counting_host_resource> b(
        64, host, emulated_device_resource{device});
    const auto data = b.device();
    CHECK(data.size() == 64);
    CHECK(all_zero(device_contents(data)));
    CHECK(b.head() == head::at_device);
    CHECK(host.allocations() == 0);
    const auto stats = device.stats();
    CHECK(stats.allocations == 1);
    CHECK(stats.zero_fills == 1);
    CHECK(stats.uploads == 0);
  }

  TEST_CASE("the Caffe sequence reaches every state and copies only when the other side is newer") {
    emulated_device device;
    buffer b(8, {}, emulated_device_resource{device});
    CHECK(b.head() == head::uninitialized);

    auto host = b.mutable_host();
    std::iota(host.begin(), host.end(), 1.0f);
    CHECK(b.head() == head::at_host);

    const auto on_device = b.device();  // host is newer: one upload
    CHECK(b.head() == head::synced);
    CHECK(device.stats().uploads == 1);
    CHECK(device_contents(on_device) == std::vector<float>{1, 2, 3, 4, 5, 6, 7, 8});

    (void)b.host();  // synced: nothing moves
    (void)b.device();
    CHECK(device.stats().uploads == 1);
    CHECK(device.stats().downloads == 0);

    auto device_data = b.mutable_device();  // synced -> at_device without a copy
    CHECK(b.head() == head::at_device);
    device_data.data()[0] = 100.0f;  // a "kernel" writes the device copy
    CHECK(device.stats().uploads == 1);

    const auto back = b.host();  // device is newer: one download
    CHECK(b.head() == head::synced);
    CHECK(device.stats().downloads == 1);
    CHECK(back[0] == 100.0f);
    CHECK(back[7] == 8.0f);

    (void)b.mutable_host();  // synced -> at_host without a copy
    CHECK(b.head() == head::at_host);
    (void)b.mutable_device();  // at_host -> at_device: the write needs the newest data
    CHECK(b.head() == head::at_device);
    CHECK(device.stats().uploads == 2);
    (void)b.mutable_host();  // at_device -> at_host: likewise
    CHECK(b.head() == head::at_host);
    CHECK(device.stats().downloads == 2);
    CHECK(device.stats().allocations == 1);
  }

  TEST_CASE("every synchronous transition of the table is taken with exactly its work") {
    constexpr std::array states{head::uninitialized, head::at_host, head::at_device, head::synced};
    constexpr std::array operations{operation::read_host,   operation::write_host,
                                    operation::read_device, operation::write_device,
                                    operation::borrow_host, operation::borrow_device};
    for (const head from : states) {
      for (const operation op : operations) {
        CAPTURE(crema::to_string(from));
        CAPTURE(crema::to_string(op));
        emulated_device device;
        std::vector<float> borrowed_host(16, 7.0f);
        std::vector<float> borrowed_device(16, 9.0f);
        buffer b = make_in_state(from, device);
        device.reset_stats();

        apply(b, op, borrowed_host, borrowed_device);

        const auto expected = crema::transition(from, op);
        REQUIRE(expected.has_value());
        CHECK(b.head() == expected->next);
        const auto stats = device.stats();
        const auto work = expected->work;
        CHECK(stats.uploads == (work == crema::action::copy_to_device ? 1U : 0U));
        CHECK(stats.downloads == (work == crema::action::copy_to_host ? 1U : 0U));
        CHECK(stats.zero_fills == (work == crema::action::zero_fill_device ? 1U : 0U));
      }
    }
  }

  TEST_CASE("common access patterns cost the minimum number of transfers") {
    emulated_device device;
    buffer b(32, {}, emulated_device_resource{device});

    SUBCASE("fill on the host, read on the device many times: one upload") {
      std::ranges::fill(b.mutable_host(), 1.0f);
      for (int i = 0; i < 10; ++i) (void)b.device();
      CHECK(device.stats().uploads == 1);
      CHECK(device.stats().downloads == 0);
    }
    SUBCASE("a blob's data and diff over five steps: one upload and one download each") {
      for (int step = 0; step < 5; ++step) {
        std::ranges::fill(b.mutable_host(), static_cast<float>(step));  // the data layer fills
        (void)b.device();                                               // forward reads
        (void)b.mutable_device();                                       // backward writes
        (void)b.host();                                                 // the solver reads
      }
      CHECK(device.stats().uploads == 5);
      CHECK(device.stats().downloads == 5);
    }
    SUBCASE("a device-only buffer never crosses the bus") {
      for (int i = 0; i < 10; ++i) {
        (void)b.mutable_device();
        (void)b.device();
      }
      CHECK(device.stats().uploads == 0);
      CHECK(device.stats().downloads == 0);
      CHECK(device.stats().zero_fills == 1);
    }
    CHECK(device.stats().allocations <= 1);
  }

  TEST_CASE("borrowed host memory is used in place and never freed") {
    emulated_device device;
    crema::test::counting_host_resource host;
    std::vector<float> mine(4, 3.0f);
    {
      crema::synced_buffer<float, crema::test::counting_host_resource> b(
          4, host, emulated_device_resource{device});
      (void)b.mutable_host();  // an owned host side first: it must be freed when replaced
      REQUIRE(host.allocations() == 1);
      const void* owned = b.host().data();

      b.set_host_data(mine);
      CHECK(host.times_freed(owned) == 1);
      CHECK(b.head() == head::at_host);
      CHECK(b.host().data() == mine.data());
      CHECK(device_contents(b.device()) == mine);

      b.mutable_host()[0] = 5.0f;
      CHECK(mine[0] == 5.0f);
    }
    CHECK(host.times_freed(mine.data()) == 0);
    CHECK(host.deallocations() == 1);
    CHECK(device.stats().live_bytes == 0);
  }

  TEST_CASE("borrowed device memory is used in place and never freed") {
    emulated_device device;
    std::vector<float> fake_device(4, 2.0f);
    {
      buffer b(4, {}, emulated_device_resource{device});
      b.set_device_data({fake_device.data(), fake_device.size()});
      CHECK(b.head() == head::at_device);
      CHECK(b.device().data() == fake_device.data());
      CHECK(b.host()[3] == 2.0f);
    }
    CHECK(device.stats().deallocations == 0);
    CHECK(device.stats().allocations == 0);
  }

  TEST_CASE("borrowing memory of the wrong size or a null pointer is a length_error") {
    buffer b(4);
    std::vector<float> three(3);
    CHECK_THROWS_WITH_AS(b.set_host_data(three),
                         "synced_buffer::set_host_data: 3 elements given for a buffer of 4",
                         crema::length_error);
    CHECK_THROWS_WITH_AS(b.set_device_data({nullptr, 4}),
                         "synced_buffer::set_device_data: null pointer given for 4 elements",
                         crema::length_error);
    CHECK(b.head() == head::uninitialized);
  }

  TEST_CASE("owned memory is freed exactly once across moves") {
    emulated_device device;
    crema::test::counting_host_resource host;
    using counted = crema::synced_buffer<int, crema::test::counting_host_resource>;
    {
      counted a(10, host, emulated_device_resource{device});
      a.mutable_host()[2] = 42;
      (void)a.device();
      const void* host_side = a.host().data();

      counted b(std::move(a));
      CHECK(a.size() == 0);  // NOLINT(bugprone-use-after-move): moved-from is empty, by contract
      CHECK(a.head() == head::uninitialized);
      CHECK(b.head() == head::synced);
      CHECK(b.host()[2] == 42);

      counted c(3, host, emulated_device_resource{device});
      (void)c.mutable_host();
      c = std::move(b);
      CHECK(c.host()[2] == 42);
      CHECK(host.times_freed(host_side) == 0);
    }
    CHECK(host.allocations() == 2);
    CHECK(host.deallocations() == 2);
    CHECK(device.stats().allocations == device.stats().deallocations);
    CHECK(device.stats().live_bytes == 0);
  }

  TEST_CASE("a buffer of zero elements moves through the states and allocates nothing") {
    emulated_device device;
    crema::test::counting_host_resource host;
    crema::synced_buffer<float, crema::test::counting_host_resource> b(
        0, host, emulated_device_resource{device});
    crema::emulated_stream stream;
    CHECK(b.host().empty());
    CHECK(b.head() == head::at_host);
    b.upload_async(stream);
    CHECK(b.head() == head::synced);
    CHECK(b.mutable_device().empty());
    CHECK(b.head() == head::at_device);
    CHECK(b.host().empty());
    CHECK(host.allocations() == 0);
    CHECK(device.stats() == crema::emulated_device_stats{});
  }

  TEST_CASE("an element count whose byte size overflows is a length_error") {
    CHECK_THROWS_AS((void)buffer(buffer::max_size() + 1), crema::length_error);
    CHECK_THROWS_WITH_AS(crema::synced_buffer<double>(SIZE_MAX),
                         doctest::Contains("elements of 8 bytes overflow"), crema::length_error);
    CHECK_NOTHROW((void)buffer(buffer::max_size()));  // allocates nothing until touched
  }

  TEST_CASE("a failed device allocation throws allocation_error and leaves the buffer as it was") {
    emulated_device device;
    using limited = crema::limiting_resource_adaptor<emulated_device_resource>;
    limited budget(emulated_device_resource{device}, 100);
    {
      crema::synced_buffer<float, host_malloc_resource, limited> b(1000, {}, budget);
      std::ranges::fill(b.mutable_host(), 2.5f);
      CHECK_THROWS_WITH_AS(
          (void)b.device(),
          "cannot allocate 4000 bytes of device memory: limit of 100 bytes, 0 in use",
          crema::allocation_error);
      CHECK(b.head() == head::at_host);
      CHECK(b.host()[999] == 2.5f);
      CHECK_THROWS_AS((void)b.mutable_device(), crema::allocation_error);
      crema::emulated_stream stream;
      CHECK_THROWS_AS(b.upload_async(stream), crema::allocation_error);
      CHECK_FALSE(b.transfer_pending());
    }
    CHECK(budget.allocated_bytes() == 0);
    CHECK(device.stats().live_bytes == 0);
  }

  TEST_CASE("a failed host allocation names the bytes and the host side") {
    using limited = crema::limiting_resource_adaptor<host_malloc_resource>;
    limited budget(host_malloc_resource{}, 64);
    crema::synced_buffer<double, limited> small(8, budget);
    (void)small.host();  // takes the whole budget
    crema::synced_buffer<double, limited> b(2, budget);
    try {
      (void)b.mutable_host();
      FAIL("expected an allocation_error");
    } catch (const crema::allocation_error& e) {
      CHECK(e.bytes() == 16);
      CHECK(e.side() == "host");
      CHECK(std::string(e.what()) ==
            "cannot allocate 16 bytes of host memory: limit of 64 bytes, 64 in use");
    }
    CHECK(b.head() == head::uninitialized);
  }

  TEST_CASE("a buffer remembers the device it lives on") {
    emulated_device device(3);
    buffer b(4, {}, emulated_device_resource{device});
    CHECK(b.device_id() == 3);
    buffer moved(std::move(b));
    CHECK(moved.device_id() == 3);
  }
}

TEST_SUITE("synced_buffer asynchronous copies") {
  TEST_CASE("an upload is not synced before the copy has finished") {
    emulated_device device;
    crema::emulated_stream stream;
    crema::test::gate gate;
    buffer b(256, {}, emulated_device_resource{device});
    std::ranges::fill(b.mutable_host(), 4.0f);

    stream.launch([&] { gate.wait(); });  // hold the stream: the copy stays queued
    b.upload_async(stream);
    CHECK(b.head() == head::at_host);
    CHECK(b.transfer_pending());
    CHECK(device.stats().uploads == 1);

    gate.open();
    b.wait();
    CHECK_FALSE(b.transfer_pending());
    CHECK(b.head() == head::synced);
    CHECK(device_contents(b.device()) == std::vector<float>(256, 4.0f));
    CHECK(device.stats().uploads == 1);  // the access after the upload copies nothing
  }

  TEST_CASE("the next access waits for a pending upload") {
    emulated_device device;
    crema::emulated_stream stream;
    crema::test::gate gate;
    buffer b(1024, {}, emulated_device_resource{device});
    std::ranges::fill(b.mutable_host(), 6.0f);
    stream.launch([&] { gate.wait(); });
    b.upload_async(stream);  // the device side is allocated without zero fill

    std::thread opener([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      gate.open();
    });
    const auto on_device = b.device();  // must block until the copy has run
    opener.join();
    CHECK(device_contents(on_device) == std::vector<float>(1024, 6.0f));
    CHECK(b.head() == head::synced);
  }

  TEST_CASE("a download lands on the host before the host is read") {
    emulated_device device;
    crema::emulated_stream stream;
    buffer b(100, {}, emulated_device_resource{device});
    auto on_device = b.mutable_device();
    std::fill(on_device.data(), on_device.data() + on_device.size(), 8.0f);
    b.download_async(stream);
    const auto host = b.host();
    CHECK(std::ranges::all_of(host, [](float v) { return v == 8.0f; }));
    CHECK(b.head() == head::synced);
    CHECK(device.stats().downloads == 1);
  }

  TEST_CASE("an asynchronous copy from the wrong head is a state_error naming the head") {
    crema::emulated_stream stream;
    buffer fresh(4);
    CHECK_THROWS_WITH_AS(fresh.upload_async(stream),
                         "synced_buffer: upload_async needs the newest data on its source side, "
                         "but the head is uninitialized",
                         crema::state_error);
    (void)fresh.host();
    CHECK_THROWS_WITH_AS(fresh.download_async(stream), doctest::Contains("the head is at_host"),
                         crema::state_error);
    (void)fresh.device();
    CHECK_THROWS_AS(fresh.upload_async(stream), crema::state_error);  // synced
    CHECK(fresh.head() == head::synced);
  }

  TEST_CASE("destroying a buffer with a copy in flight waits for the copy") {
    emulated_device device;
    crema::emulated_stream stream;
    crema::test::gate gate;
    std::atomic<bool> copy_ran{false};
    std::thread opener;
    {
      buffer b(4096, {}, emulated_device_resource{device});
      (void)b.mutable_host();
      stream.launch([&] { gate.wait(); });
      b.upload_async(stream);
      stream.launch([&] { copy_ran = true; });
      opener = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        gate.open();
      });
    }  // under ASan/TSan a free before the copy ended would be reported here
    opener.join();
    CHECK(device.stats().live_bytes == 0);
    stream.synchronize();
    CHECK(copy_ran);
  }

  TEST_CASE("an inline stream finishes the copy before upload_async returns") {
    emulated_device device;
    crema::emulated_stream stream{crema::emulated_stream::run_inline};
    buffer b(16, {}, emulated_device_resource{device});
    std::ranges::fill(b.mutable_host(), 1.5f);
    b.upload_async(stream);
    CHECK_FALSE(b.transfer_pending());
    CHECK(b.head() == head::synced);
  }
}
