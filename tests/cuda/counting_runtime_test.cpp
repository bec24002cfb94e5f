// The CUDA runtime calls a pipeline of crema::cuda::device_batch costs per batch, counted by the
// counting runtime (counting_runtime.hpp) that this test links instead of libcudart: crema's
// real CUDA classes, run without a GPU. What a feed that scales must keep to: one copy and one
// event recorded per batch on the producers' side, one stream wait on the consumer's, no event,
// stream or memory made once the slots have been through a fill, and no device switch.

#include <crema/pipeline/cuda/device_batch.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include "common/watchdog.hpp"
#include "counting_runtime.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
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

struct fill_on_host {
  using batch_type = ::batch_type;
  std::shared_ptr<crema::cuda_stream> uploads;

  batch_type make_batch(const crema::batch_context& where) const {
    return batch_type(where.batch_size, shape, uploads);
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

}  // namespace

TEST_SUITE("cuda device_batch, counted") {
  TEST_CASE(
      "a batch costs one copy and one event on the producer's side and one stream wait on "
      "the consumer's, and steady state makes no event, stream or memory") {
    crema::test::watchdog guard(60s, "counted device batches");
    constexpr int batches = 400;
    constexpr std::size_t prefetch = 3;
    constexpr std::size_t producers = 2;
    crema::cuda_stream compute;  // the consumer's stream
    auto uploads = std::make_shared<crema::cuda_stream>();
    const auto at_start = counting::all_threads();
    const auto consumer_at_start = counting::this_thread();
    counting::counts warm;  // every thread's calls once the slots have all been filled twice
    counting::counts warm_until;
    counting::counts consumer;  // the consumer thread's calls while the pipeline ran
    int pulled = 0;
    bool intact = true;
    {
      crema::double_buffered_pipeline pipe{
          crema::vector_source<int>(first_records(batches * static_cast<int>(batch_size))),
          fill_on_host{uploads},
          {.batch_size = batch_size,
           .prefetch = prefetch,
           .producers = producers,
           .threads = 2,
           .mode = crema::pipeline_mode::single_pass,
           .ordered = true}};
      for (auto batch : pipe.consumer(0)) {
        if (pulled == 20) warm = counting::all_threads();
        if (pulled == batches - 20) warm_until = counting::all_threads();
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
      consumer = counting::this_thread() - consumer_at_start;
    }
    CHECK(intact);
    REQUIRE(pulled == batches);
    const auto everything = counting::all_threads() - at_start;
    const auto producer_side = everything - (counting::this_thread() - consumer_at_start);
    INFO("calls on the producers' side:\n" << calls_besides(producer_side, {}));
    INFO("calls on the consumer's thread:\n" << calls_besides(consumer, {}));
    // The producers: one copy of data and labels together, one event recorded after it, and the
    // stream's wait for the consumer's release (not before a slot's first fill).
    CHECK(producer_side[call::memcpy_async] == batches);
    CHECK(producer_side[call::event_record] == batches);
    CHECK(producer_side[call::stream_wait_event] <= batches);
    CHECK(producer_side[call::stream_wait_event] >= batches - prefetch);
    // Before a slot's host block is written again, its last upload must have read it: one
    // event synchronisation per fill, of that slot's own copy (done long before, in steady state).
    CHECK(producer_side[call::event_synchronize] <= batches);
    // The consumer: the wait, and its own record for release_after; it never blocks on a copy.
    CHECK(consumer[call::memcpy_async] == 0);
    CHECK(consumer[call::stream_wait_event] <= batches);
    CHECK(consumer[call::event_record] == batches);
    CHECK(consumer[call::event_synchronize] == 0);
    CHECK(consumer[call::stream_synchronize] == 0);
    // No device switch anywhere, freeing included: the one device is current on every thread.
    CHECK(everything[call::set_device] == 0);
    CHECK(everything[call::stream_create] == 0);
    // Events come from the streams' pools, which keep what they made: the upload stream never
    // holds more than a copy in flight per slot, the consumer's more than a release per slot. So
    // events are made while the slots first go round, never one per batch.
    CHECK(everything[call::event_create] <= 2 * prefetch);
    // One pinned block and one device block per slot, each made on the slot's first fill.
    CHECK(everything[call::allocate] == 2 * prefetch);
    // Steady state: no memory, no stream, the copies of the batches pulled meanwhile.
    const auto steady = warm_until - warm;
    CHECK(steady[call::memcpy_async] + prefetch >= batches - 40);  // the producers run ahead
    CHECK(steady[call::memcpy_async] <= batches - 40 + prefetch);
    CHECK(steady[call::allocate] == 0);
    CHECK(steady[call::stream_create] == 0);
  }
}
