// The soak (label slow, outside CI: `cmake --workflow --preset slow`, or run crema_soak_tests):
// 10^8 records (CREMA_SOAK_RECORDS to change it) through pipelines of random shapes that are
// stopped, destroyed under their consumers or run to the end of their pass, over sources and
// transforms that throw now and then. After a warm-up, the process's resident memory (not under a
// sanitizer), threads and file descriptors must stay where they were (read from /proc), and every
// pass that ended without a failure must have delivered every record exactly once across its
// consumers. Twice: into host batches, and into device batches on emulated devices (uploaded on
// the consumer's stream, on each batch's own, or by an uploader), which must also leave no device
// memory behind and arrive on the device as they were filled.
#include <crema/memory/emulated_device_resource.hpp>
#include <crema/memory/host_malloc_resource.hpp>
#include <crema/pipeline/device_batch.hpp>

#include "common/soak.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <random>
#include <stdexcept>

namespace {

using namespace crema::test::soaking;

// Each item: the record and its pass (a batch of a repeating run may hold the end of one pass and
// the start of the next).
struct throwing_copy {
  std::uint64_t throw_on = ~std::uint64_t{0};
  std::uint64_t operator()(std::uint32_t record, const crema::sample_context& context) const {
    if (record == throw_on) throw std::runtime_error("soak: the transform fails");
    return (context.epoch << 32) | record;
  }
};

// The host batches' records: items that carry their pass.
struct host_first_pass {
  template <class Batch, class Visit>
  bool operator()(const Batch& batch, Visit&& visit) const {
    for (const std::uint64_t item : batch.items()) {
      if ((item >> 32) == 0) visit(static_cast<std::uint32_t>(item));
    }
    return true;
  }
};

// The emulated devices of one pipeline, one per consumer.
struct emulated_devices {
  explicit emulated_devices(std::size_t consumers) : devices(consumers) {}
  [[nodiscard]] crema::emulated_device_resource resource(std::size_t consumer) {
    return crema::emulated_device_resource(devices.at(consumer));
  }
  [[nodiscard]] std::int64_t live_bytes() const {
    std::int64_t live = 0;
    for (const auto& device : devices) live += device.stats().live_bytes;
    return live;
  }
  std::deque<crema::emulated_device> devices;
};

using emulated_batch =
    crema::device_batch<float, crema::host_malloc_resource, crema::emulated_device_resource>;

}  // namespace

TEST_CASE(
    "soak: pipelines stopped, destroyed and failing at random hold memory, threads and "
    "descriptors flat, and every whole pass is exact") {
  soak([](std::mt19937_64& draw, ending how) {
    return one_run(
        draw, how,
        [](std::size_t /*consumers*/, std::uint64_t throw_on) { return throwing_copy{throw_on}; },
        host_first_pass{});
  });
}

TEST_CASE(
    "soak: pipelines of device batches stopped, destroyed and failing at random leave no device "
    "memory, hold threads and descriptors flat, and every whole pass is exact") {
  std::size_t device_leaks = 0;
  soak([&](std::mt19937_64& draw, ending how) {
    std::unique_ptr<emulated_devices> devices;
    const run_result result = device_run<emulated_batch>(draw, how, [&](std::size_t consumers) {
      devices = std::make_unique<emulated_devices>(consumers);
      return devices.get();
    });
    device_leaks += devices->live_bytes() != 0 ? 1 : 0;
    return result;
  });
  CHECK(device_leaks == 0);
}
