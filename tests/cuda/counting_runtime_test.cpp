// The CUDA runtime calls a pipeline of crema::cuda::device_batch costs per batch, counted by the
// counting runtime (counting_runtime.hpp) that this test links instead of libcudart: crema's
// real CUDA classes, run without a GPU. What a feed that scales must keep to: one copy and one
// event recorded per batch on the producers' side, one stream wait on the consumer's, no event,
// stream or memory made once the slots have been through a fill, and no device switch. With two
// devices, as a node's GPUs: each consumer's batches in its own device's memory, and no call that
// a GPU refuses for mixing devices. And what a feed must do when the runtime fails: stop with an
// error that names the call, never deliver a batch whose copy failed, never hang or crash.

#include <crema/core/cuda/device.hpp>
#include <crema/memory/cuda/cuda_device_resource.hpp>
#include <crema/memory/cuda/host_pinned_resource.hpp>
#include <crema/pipeline/cuda/device_batch.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include "common/pipeline_failure.hpp"
#include "common/watchdog.hpp"
#include "counting_runtime.hpp"
#include "device_consumers.hpp"

#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;
namespace counting = crema::test::counting_cuda;
using counting::call;
using batch_type = crema::cuda::device_batch<float>;
constexpr crema::record_shape shape{3, 8, 8};
constexpr std::size_t batch_size = 8;

using uploader_type = crema::batch_uploader<crema::cuda_stream>;

// Where the batches upload: a stream of each batch's own, one stream they share, or one
// uploader's thread and stream.
struct upload_choice {
  std::shared_ptr<crema::cuda_stream> shared_stream = nullptr;
  std::shared_ptr<uploader_type> uploader = nullptr;
};

// Fills record r's pixels and label with r; uploads as `uploads` says.
struct fill_on_host {
  using batch_type = ::batch_type;
  upload_choice uploads;

  batch_type make_batch(const crema::batch_context& where) const {
    if (uploads.uploader) return batch_type(where.batch_size, shape, uploads.uploader);
    if (uploads.shared_stream) return batch_type(where.batch_size, shape, uploads.shared_stream);
    return batch_type(where.batch_size, shape);
  }
  void operator()(const int& record, batch_type& batch, const crema::sample_context& sample) const {
    const auto pixels = batch.record(sample.index);
    std::fill(pixels.begin(), pixels.end(), static_cast<float>(record));
    batch.set_label(sample.index, static_cast<float>(record));
  }
};

std::vector<int> first_records(int count) {
  std::vector<int> records(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) records[static_cast<std::size_t>(i)] = i;
  return records;
}

// Every call of `calls` but those named in `allowed`, as "name: count" lines (empty if none).
std::string calls_besides(const counting::counts& calls, std::initializer_list<call> allowed) {
  std::string unexpected;
  for (std::size_t i = 0; i < calls.of.size(); ++i) {
    const auto kind = static_cast<call>(i);
    if (calls.of[i] == 0 || std::find(allowed.begin(), allowed.end(), kind) != allowed.end()) {
      continue;
    }
    unexpected += std::string(counting::name_of(kind)) + ": " + std::to_string(calls.of[i]) + "\n";
  }
  return unexpected;
}

constexpr int batches = 400;
constexpr std::size_t prefetch = 3;

// One ordered pass of `batches` batches by `producers`.
crema::pipeline_options pass_of(std::size_t producers) {
  return {.batch_size = batch_size,
          .prefetch = prefetch,
          .producers = producers,
          .threads = 2,
          .mode = crema::pipeline_mode::single_pass,
          .ordered = true};
}

// What one ordered pass of `batches` batches cost, counted.
struct counted_run {
  counting::counts everything;    // every thread, the pipeline's life
  counting::counts consumer;      // the consumer's thread while the pipeline ran
  counting::counts steady;        // every thread, from batch 20 to `batches` - 20
  std::uint64_t stream_overlaps;  // calls that met another on the same stream
  std::uint64_t copying_threads;  // threads that made their first copy during the run
};

// Pulls every batch on this thread, its stream waiting for each and releasing it after; checks
// the consumer's side of each batch (one stream wait, nothing else) and the bytes that arrived.
counted_run run_counted(upload_choice uploads, std::size_t producers) {
  crema::cuda_stream compute;  // the consumer's stream
  const auto at_start = counting::all_threads();
  const auto consumer_at_start = counting::this_thread();
  const auto overlaps_at_start = counting::stream_overlaps();
  const auto copiers_at_start = counting::threads_calling(call::memcpy_async);
  counted_run run{};
  counting::counts warm;
  int pulled = 0;
  bool intact = true;
  {
    crema::double_buffered_pipeline pipe{
        crema::vector_source<int>(first_records(batches * static_cast<int>(batch_size))),
        fill_on_host{std::move(uploads)}, pass_of(producers)};
    for (auto batch : pipe.consumer(0)) {
      if (pulled == 20) warm = counting::all_threads();
      if (pulled == batches - 20) run.steady = counting::all_threads() - warm;
      // The consumer's side of one batch: its stream waits for the upload, nothing else.
      const auto before = counting::this_thread();
      const auto on_device = batch->device(compute);
      const auto consumer_calls = counting::this_thread() - before;
      CHECK_MESSAGE(consumer_calls[call::stream_wait_event] <= 1, "batch " << pulled);
      CHECK_MESSAGE(
          calls_besides(consumer_calls, {call::stream_wait_event}).empty(),
          "batch " << pulled << ": " << calls_besides(consumer_calls, {call::stream_wait_event}));
      // The counting runtime's copies are done: device memory reads as host memory.
      const float first = static_cast<float>(pulled * static_cast<int>(batch_size));
      for (std::size_t i = 0; i < batch->size(); ++i) {
        const float* record = on_device.data.data() + i * shape.elements();
        intact = intact && on_device.labels.data()[i] == first + static_cast<float>(i) &&
                 std::all_of(record, record + shape.elements(),
                             [&](float v) { return v == first + static_cast<float>(i); });
      }
      batch.release_after(compute.record());
      ++pulled;
    }
    run.consumer = counting::this_thread() - consumer_at_start;
  }
  CHECK(intact);
  CHECK(pulled == batches);
  run.everything = counting::all_threads() - at_start;
  run.stream_overlaps = counting::stream_overlaps() - overlaps_at_start;
  run.copying_threads = counting::threads_calling(call::memcpy_async) - copiers_at_start;
  return run;
}

// What every feed of device batches must keep to, shared stream or not.
void check_one_copy_one_event(const counted_run& run, std::size_t streams_made) {
  const auto producer_side = run.everything - run.consumer;
  INFO("calls on the producers' side:\n" << calls_besides(producer_side, {}));
  INFO("calls on the consumer's thread:\n" << calls_besides(run.consumer, {}));
  // The producers: one copy of data and labels together, one event recorded after it, and the
  // stream's wait for the consumer's release (not before a slot's first fill).
  CHECK(producer_side[call::memcpy_async] == batches);
  CHECK(producer_side[call::event_record] == batches);
  CHECK(producer_side[call::stream_wait_event] <= batches);
  CHECK(producer_side[call::stream_wait_event] >= batches - prefetch);
  // Before a slot's host block is written again, its last upload must have read it: at most one
  // event synchronisation per fill, of that slot's own copy (long done, in steady state).
  CHECK(producer_side[call::event_synchronize] <= batches);
  // The consumer: the waits, and its own records for release_after; it never blocks on a copy.
  CHECK(run.consumer[call::memcpy_async] == 0);
  CHECK(run.consumer[call::stream_wait_event] <= batches);
  CHECK(run.consumer[call::event_record] == batches);
  CHECK(run.consumer[call::event_synchronize] == 0);
  CHECK(run.consumer[call::stream_synchronize] == 0);
  // No device switch anywhere, freeing included: the one device is current on every thread.
  CHECK(run.everything[call::set_device] == 0);
  CHECK(run.everything[call::stream_create] == streams_made);
  // Events come from the streams' pools, which keep what they made: an upload stream holds no
  // more than a copy in flight per slot, the consumer's a release per slot and one being
  // recorded. So events are made while the slots first go round, never one per batch.
  CHECK(run.everything[call::event_create] <= 2 * prefetch + 1);
  // One pinned block and one device block per slot, each made on the slot's first fill.
  CHECK(run.everything[call::allocate] == 2 * prefetch);
  // Steady state: no memory, no stream, the copies of the batches pulled meanwhile.
  CHECK(run.steady[call::memcpy_async] + prefetch >= batches - 40);  // producers run ahead
  CHECK(run.steady[call::memcpy_async] <= batches - 40 + prefetch);
  CHECK(run.steady[call::allocate] == 0);
  CHECK(run.steady[call::stream_create] == 0);
}

// How a pass whose runtime fails ended: the error's message (with what a pipeline_error nests),
// the batches delivered, and whether each held its records.
struct failed_pass {
  std::string error;
  int delivered = 0;
  bool intact = true;
};

// One ordered pass of `batches` batches, consumed as run_counted consumes it, with the runtime's
// call `c` failing with `error` after `after` more of them (and every call after it, if `sticky`).
failed_pass run_failing(upload_choice uploads, std::size_t producers, call c, std::uint64_t after,
                        cudaError_t error, bool sticky) {
  failed_pass pass;
  try {
    crema::cuda_stream compute;
    counting::fail_call(c, after, error, sticky);
    crema::double_buffered_pipeline pipe{
        crema::vector_source<int>(first_records(batches * static_cast<int>(batch_size))),
        fill_on_host{std::move(uploads)}, pass_of(producers)};
    for (auto batch : pipe.consumer(0)) {
      const auto on_device = batch->device(compute);
      const float first = static_cast<float>(pass.delivered * static_cast<int>(batch_size));
      for (std::size_t i = 0; i < batch->size(); ++i) {
        const float* record = on_device.data.data() + i * shape.elements();
        pass.intact = pass.intact && on_device.labels.data()[i] == first + static_cast<float>(i) &&
                      std::all_of(record, record + shape.elements(),
                                  [&](float v) { return v == first + static_cast<float>(i); });
      }
      batch.release_after(compute.record());
      ++pass.delivered;
    }
  } catch (const std::exception& e) {
    pass.error = crema::test::what_with_cause(e);
  }
  counting::heal();  // after the pipeline and its batches are gone: they were freed failing
  return pass;
}

}  // namespace

TEST_SUITE("cuda device_batch, failing runtime") {
  TEST_CASE(
      "a copy that fails stops the pass with an error naming it, and no batch goes without it") {
    crema::test::watchdog guard(60s, "device batches, a failed copy");
    const auto uploader = std::make_shared<uploader_type>(0);
    const std::pair<const char*, upload_choice> feeds[] = {
        {"streams of their own", {}},
        {"one shared stream", {.shared_stream = std::make_shared<crema::cuda_stream>()}},
        {"an uploader", {.uploader = uploader}}};
    for (const auto& [name, uploads] : feeds) {
      const std::string feed = name;
      CAPTURE(feed);
      constexpr int producers = 2;
      const failed_pass pass =
          run_failing(uploads, producers, call::memcpy_async, 50, cudaErrorInvalidValue, false);
      CHECK(pass.error.find("cudaMemcpyAsync") != std::string::npos);
      CHECK(pass.error.find("cudaErrorInvalidValue") != std::string::npos);
      // The 51st copy failed. Producers copy in the order they finish filling, so it may be a
      // later batch's than the 51st, while each other producer still holds one earlier batch to
      // copy: at most producers - 1 batches past the 50th are delivered.
      CHECK(pass.delivered <= 50 + producers - 1);
      CHECK(pass.intact);
      CHECK(counting::failed_calls() == 1);
      // The batch whose copy failed is named, as a producer's finishing step is; every batch
      // delivered came before it. With an uploader, the consumer meets the failure at that
      // batch's device(): the one after the last delivered.
      unsigned long long failed_batch = 0;
      const char* const named = uploads.uploader
                                    ? "device_batch: uploading batch %llu of consumer 0"
                                    : "pipeline: finishing batch %llu of consumer 0";
      REQUIRE(std::sscanf(pass.error.c_str(), named, &failed_batch) == 1);
      const auto delivered = static_cast<unsigned long long>(pass.delivered);
      CHECK(failed_batch >= delivered);
      if (uploads.uploader) CHECK(failed_batch == delivered);
    }
  }

  TEST_CASE("memory refused on a slot's first fill is an allocation_error naming the bytes") {
    crema::test::watchdog guard(60s, "device batches, memory refused");
    // The first allocation: a slot's pinned block, as its producer first writes it; the second,
    // another slot's, or that slot's device block as it is first uploaded.
    for (const std::uint64_t after : {0, 1}) {
      CAPTURE(after);
      const failed_pass pass =
          run_failing({}, 2, call::allocate, after, cudaErrorMemoryAllocation, false);
      // One block a slot: the labels rounded up to 256 bytes, the records, and in builds with
      // misuse checks one element after them.
      const std::size_t block =
          (64 + batch_size * shape.elements() + (crema::detail::misuse_checks ? 1 : 0)) *
          sizeof(float);
      CHECK(pass.error.find("pipeline: ") == 0);
      CHECK(pass.error.find("cannot allocate " + std::to_string(block) + " bytes of ") !=
            std::string::npos);
      CHECK(pass.error.find("cudaErrorMemoryAllocation") != std::string::npos);
      CHECK(pass.intact);
      CHECK(counting::failed_calls() == 1);
    }
  }

  TEST_CASE("a fault that fails every call after it stops the pass, and nothing hangs or crashes") {
    crema::test::watchdog guard(60s, "device batches, a sticky fault");
    // As after a consumer kernel's illegal address: one call fails (a refill's wait for its
    // slot's last upload, a copy, a stream's wait, a record), then every call of every thread,
    // the frees included. The uploader goes on to the next pass.
    const auto uploader = std::make_shared<uploader_type>(0);
    for (const call first : {call::event_synchronize, call::memcpy_async, call::stream_wait_event,
                             call::event_record}) {
      for (const bool with_uploader : {false, true}) {
        CAPTURE(counting::name_of(first));
        CAPTURE(with_uploader);
        const failed_pass pass =
            run_failing(with_uploader ? upload_choice{.uploader = uploader} : upload_choice{}, 4,
                        first, 30, cudaErrorIllegalAddress, true);
        CHECK(pass.error.find("cudaErrorIllegalAddress") != std::string::npos);
        CHECK(pass.delivered < batches);
        CHECK(pass.intact);
        CHECK(counting::failed_calls() >= 1);
      }
    }
  }
}

TEST_SUITE("cuda device_batch, counted") {
  TEST_CASE(
      "a batch costs one copy and one event on the producer's side and one stream wait on "
      "the consumer's, and steady state makes no stream or memory") {
    crema::test::watchdog guard(60s, "counted device batches");
    const auto run = run_counted({.shared_stream = std::make_shared<crema::cuda_stream>()}, 2);
    check_one_copy_one_event(run, 0);
  }

  TEST_CASE(
      "batches with streams of their own: no two producers ever call on the same stream at "
      "once") {
    crema::test::watchdog guard(60s, "counted device batches, own streams");
    for (const std::size_t producers : {2, 4}) {
      CAPTURE(producers);
      const auto run = run_counted({}, producers);
      check_one_copy_one_event(run, prefetch);  // a stream per slot, made with it
      CHECK(run.stream_overlaps == 0);
    }
  }

  TEST_CASE(
      "batches finished through an uploader: one copy and one event a batch, every copy made on "
      "the uploader's thread, none by a producer") {
    crema::test::watchdog guard(60s, "counted device batches, uploader");
    for (const std::size_t producers : {2, 4}) {
      CAPTURE(producers);
      const auto uploader = std::make_shared<uploader_type>(0);  // device 0's stream, made here
      const auto run = run_counted({.uploader = uploader}, producers);
      check_one_copy_one_event(run, 0);
      CHECK(run.copying_threads == 1);  // the uploader's; the producers and consumer copy nothing
      CHECK(run.stream_overlaps == 0);
    }
  }
}

// Consumer i's batches on device i: a stream of each batch's own on that device, or that
// device's uploader.
struct fill_on_consumer_device {
  using batch_type = ::batch_type;
  std::vector<std::shared_ptr<uploader_type>> uploaders;  // by device; empty: streams

  // For consumers on devices 0 and 1, uploading through an uploader a device or with streams.
  static fill_on_consumer_device on_two_devices(bool with_uploaders) {
    fill_on_consumer_device fill;
    if (with_uploaders) {
      for (const int device : {0, 1})
        fill.uploaders.push_back(std::make_shared<uploader_type>(device));
    }
    return fill;
  }

  batch_type make_batch(const crema::batch_context& where) const {
    const auto device = static_cast<int>(where.consumer);
    if (uploaders.empty()) {
      return batch_type(where.batch_size, shape, crema::host_pinned_resource{},
                        crema::cuda_device_resource(device));
    }
    return batch_type(where.batch_size, shape, uploaders[where.consumer],
                      crema::host_pinned_resource{}, crema::cuda_device_resource(device));
  }
  void operator()(const int& record, batch_type& batch, const crema::sample_context& sample) const {
    fill_on_host{}(record, batch, sample);
  }
};

// A feed of two consumers, a device each, from 4 producers on 2 threads.
crema::pipeline_options on_two_consumers(crema::pipeline_mode mode) {
  return {.batch_size = batch_size,
          .prefetch = prefetch,
          .producers = 4,
          .threads = 2,
          .consumers = 2,
          .mode = mode};
}

TEST_SUITE("cuda device_batch, two devices") {
  TEST_CASE(
      "consumers on two devices get their batches in their own device's memory, and no call "
      "mixes devices") {
    crema::test::watchdog guard(60s, "device batches on two devices");
    const counting::devices_for_scope two_devices(2);
    for (const bool uploaders : {false, true}) {
      CAPTURE(uploaders);
      const std::uint64_t refused = counting::calls_across_devices();
      const auto fill = fill_on_consumer_device::on_two_devices(uploaders);
      constexpr int records = 200 * static_cast<int>(batch_size);
      crema::double_buffered_pipeline pipe{crema::vector_source<int>(first_records(records)), fill,
                                           on_two_consumers(crema::pipeline_mode::single_pass)};
      // What each consumer got, on a thread of its own with its device current, as a training
      // engine runs a solver a device.
      struct consumed {
        std::vector<int> records;  // whole
        int misplaced = 0;         // batches not in the consumer's device memory
      };
      std::array<consumed, 2> by{};
      const std::vector<std::string> errors =
          crema::test::consume_on_devices(pipe, 2, [&](int device, auto range) {
            consumed& mine = by[static_cast<std::size_t>(device)];
            crema::cuda_stream compute;  // made on the consumer's device
            for (auto batch : range) {
              const auto on_device = batch->device(compute);
              if (!crema::test::in_memory_of(device, on_device.data.data())) ++mine.misplaced;
              for (std::size_t i = 0; i < batch->size(); ++i) {
                const float* record = on_device.data.data() + i * shape.elements();
                const float label = on_device.labels.data()[i];
                if (std::all_of(record, record + shape.elements(),
                                [&](float v) { return v == label; })) {
                  mine.records.push_back(static_cast<int>(label));
                }
              }
              batch.release_after(compute.record());
            }
          });
      CHECK_MESSAGE(errors[0].empty(), errors[0]);
      CHECK_MESSAGE(errors[1].empty(), errors[1]);
      CHECK(by[0].misplaced == 0);
      CHECK(by[1].misplaced == 0);
      CHECK(by[0].records.size() == by[1].records.size());  // dealt in turn
      std::vector<int> every = by[0].records;
      every.insert(every.end(), by[1].records.begin(), by[1].records.end());
      std::sort(every.begin(), every.end());
      CHECK(every == first_records(records));  // each record once, intact
      CHECK(counting::calls_across_devices() == refused);
    }
  }

  TEST_CASE("a fault on one device stops a node's feed with an error naming that device") {
    crema::test::watchdog guard(60s, "device batches, a device's fault");
    const counting::devices_for_scope two_devices(2);
    // As after a kernel's fault on device 1: a call there fails (a refill's wait for its slot's
    // last upload, a copy, a stream's wait, a record; the third of its kind there once both
    // consumers have a batch, whichever device is the faster), then every call on device 1, while
    // device 0's go on. Producers upload with their own streams or through each device's
    // uploader.
    for (const call first : {call::event_synchronize, call::memcpy_async, call::stream_wait_event,
                             call::event_record}) {
      for (const bool uploaders : {false, true}) {
        CAPTURE(counting::name_of(first));
        CAPTURE(uploaders);
        const auto fill = fill_on_consumer_device::on_two_devices(uploaders);
        std::vector<std::string> errors;
        std::array<int, 2> delivered{};
        std::atomic<int> started{0};  // consumers that have had a batch
        {
          crema::double_buffered_pipeline pipe{crema::vector_source<int>(first_records(4096)), fill,
                                               on_two_consumers(crema::pipeline_mode::repeat)};
          errors = crema::test::consume_on_devices(pipe, 2, [&](int device, auto range) {
            crema::cuda_stream compute;
            for (auto batch : range) {
              (void)batch->device(compute);
              batch.release_after(compute.record());
              if (++delivered[static_cast<std::size_t>(device)] == 1 && started.fetch_add(1) == 1) {
                counting::fail_call(first, 2, cudaErrorIllegalAddress, true, 1);
              }
            }
          });
        }
        const std::uint64_t failed = counting::failed_calls();
        counting::heal();
        CHECK(failed >= 1);
        // The pass ended for both consumers (a repeating pass ends only so), one of them with
        // the fault, named with its device (whichever call met it first: a refill's allocation
        // says "cannot allocate ... : cudaErrorIllegalAddress on device 1"); device 0's
        // consumer had its batches until then.
        const std::string& ended = errors[1].empty() ? errors[0] : errors[1];
        CHECK_MESSAGE(ended.find("cudaErrorIllegalAddress") != std::string::npos, ended);
        CHECK_MESSAGE(ended.find("on device 1") != std::string::npos, ended);
        CHECK(delivered[0] > 0);
      }
    }
  }

  TEST_CASE("a consumer given batches of another device is told which, before its kernels fault") {
    crema::test::watchdog guard(60s, "device batches on the wrong device");
    const counting::devices_for_scope two_devices(2);
    // Made with the producers' current device, 0, for both consumers: consumer 1's kernels would
    // read device 0's memory from device 1.
    crema::double_buffered_pipeline pipe{
        crema::vector_source<int>(first_records(64 * static_cast<int>(batch_size))),
        fill_on_host{},
        {.batch_size = batch_size,
         .producers = 2,
         .threads = 2,
         .consumers = 2,
         .mode = crema::pipeline_mode::single_pass}};
    const std::vector<std::string> errors =
        crema::test::consume_on_devices(pipe, 2, [](int /*device*/, auto range) {
          crema::cuda_stream compute;
          for (auto batch : range) {
            (void)batch->device(compute);
            batch.release_after(compute.record());
          }
        });
    CHECK(errors[1].find("device_batch: a batch of device 0 read by a stream of device 1") == 0);
  }
}

TEST_SUITE("scoped_device, counted") {
  TEST_CASE("a device that cannot be made current is the one its error names") {
    const counting::devices_for_scope two_devices(2);
    // As after a kernel's fault on device 1: making it current fails, from device 0.
    counting::fail_call(call::set_device, 0, cudaErrorIllegalAddress, true, 1);
    CHECK_THROWS_WITH_AS(
        crema::cuda::scoped_device(1),
        doctest::Contains("cudaSetDevice(device) failed on device 1: cudaErrorIllegalAddress"),
        crema::cuda_error);
    counting::heal();
    CHECK(crema::cuda::current_device() == 0);
    {
      const crema::cuda::scoped_device on(1);
      CHECK(crema::cuda::current_device() == 1);
    }
    CHECK(crema::cuda::current_device() == 0);
  }
}

TEST_SUITE("cuda_stream, counted") {
  TEST_CASE("a stream's events are waited for spinning by default, asleep where it is made to") {
    const auto spins = [](crema::cuda_stream& stream) {
      const std::uint64_t before = counting::spinning_waits();
      for (int i = 0; i < 3; ++i) stream.record().wait();  // the second and third reused
      return counting::spinning_waits() - before;
    };
    crema::cuda_stream plain;
    crema::cuda_stream spinning(0, crema::host_wait::spin);
    crema::cuda_stream sleeping(0, crema::host_wait::sleep);
    CHECK(spins(plain) == 3);
    CHECK(spins(spinning) == 3);
    CHECK(spins(sleeping) == 0);
  }
}

TEST_SUITE("pinned_allocator, counted") {
  TEST_CASE("a vector with pinned_allocator keeps its values pinned as it grows, and frees them") {
    const auto pinned = [](const void* pointer) {
      cudaPointerAttributes where{};
      REQUIRE(cudaPointerGetAttributes(&where, pointer) == cudaSuccess);
      return where.type == cudaMemoryTypeHost;
    };
    const auto before = counting::all_threads();
    {
      std::vector<int, crema::pinned_allocator<int>> values;
      for (int v = 0; v < 1000; ++v) values.push_back(v);
      CHECK(pinned(values.data()));
      CHECK(pinned(&values.back()));
      CHECK(values[999] == 999);
      CHECK_FALSE(pinned(std::vector<int>(8).data()));  // pageable
      // The standard's rebinding: another type's allocator from this one.
      const crema::pinned_allocator<double> other(values.get_allocator());
      CHECK(other == values.get_allocator());
    }
    const auto calls = counting::all_threads() - before;
    CHECK(calls[call::allocate] > 1);  // grown
    CHECK(calls[call::free] == calls[call::allocate]);
  }
}
