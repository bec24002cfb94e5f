#pragma once

// The two feeds of the device-batch benchmarks, written once for the emulated device
// (crema-bench-device_batches) and for a GPU (crema-gpu-bench-consumer_cpu):
//
//   baseline  the demo's way before device batches: the producers make one item per record
//             (bytes to floats); the consumer collates the batch's items into a blob and uploads
//             it synchronously on its own thread before its step;
//   crema     the producers write the floats into a device_batch's host side, and its finishing
//             step starts the upload; the consumer has a batch on its device at once.
//
// Each times its consumer thread's CPU outside the training step (counter "consumer_cpu_ns", per
// batch): the share of a training thread that the feed takes.

#include "common/ratio_report.hpp"
#include "device_batches/shape.hpp"

#include <crema/core/record_shape.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <benchmark/benchmark.h>
#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace crema::bench::device_batches {

inline constexpr crema::record_shape image_shape{channels, side, side};

// The baseline's producers: one item per record.
struct to_floats {
  struct item {
    std::array<float, pixels> values;
    float label;
  };
  using item_type = item;
  void operator()(const image& record, item& out) const {
    for (std::size_t i = 0; i < pixels; ++i) {
      out.values[i] = static_cast<float>(record.bytes[i]) / 255.0f;
    }
    out.label = static_cast<float>(record.label);
  }
};

// crema's producers: the floats straight into the batch's host side. `make(batch_size, shape)`
// makes a slot's batch.
template <class Batch, class Make>
struct to_device_batch {
  using batch_type = Batch;
  Make make;

  batch_type make_batch(const crema::batch_context& where) const {
    return make(where.batch_size, image_shape);
  }
  void operator()(const image& record, batch_type& batch,
                  const crema::sample_context& sample) const {
    const auto out = batch.record(sample.index);
    for (std::size_t i = 0; i < pixels; ++i) out[i] = static_cast<float>(record.bytes[i]) / 255.0f;
    batch.set_label(sample.index, static_cast<float>(record.label));
  }
};

inline crema::pipeline_options feed_options() {
  return {
      .batch_size = batch_size, .prefetch = prefetch, .producers = producers, .threads = threads};
}

inline void count_consumer(benchmark::State& state, double consumer_ns) {
  state.counters["consumer_cpu_ns"] =
      benchmark::Counter(consumer_ns / static_cast<double>(state.iterations()));
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * batch_size));
}

// The baseline's consumer, for one case (`state.range(0)`: the step in microseconds): each batch
// collated into `data` and `labels` (synced_buffers of batch_size x pixels and batch_size floats)
// and uploaded by `device()`.
template <class Buffer>
void collating_consumer(benchmark::State& state, Buffer& data, Buffer& labels) {
  const long step = state.range(0);
  crema::double_buffered_pipeline pipe{crema::vector_source<image>(make_images()), to_floats{},
                                       feed_options()};
  auto consumer = pipe.consumer(0);
  double consumer_ns = 0;
  for (auto _ : state) {
    const double start = thread_cpu_ns();
    auto batch = consumer.pull();
    auto host = data.mutable_host();
    auto host_labels = labels.mutable_host();
    for (std::size_t i = 0; i < batch->size(); ++i) {
      std::ranges::copy(batch->items()[i].values,
                        host.begin() + static_cast<std::ptrdiff_t>(i * pixels));
      host_labels[i] = batch->items()[i].label;
    }
    batch.reset();
    benchmark::DoNotOptimize(data.device().data());  // uploads here, on the consumer's thread
    benchmark::DoNotOptimize(labels.device().data());
    consumer_ns += thread_cpu_ns() - start;
    training_step(step);
  }
  count_consumer(state, consumer_ns);
}

// crema's consumer, for one case: releases the last batch, takes the next and has it on the
// device through `use(lease)`, which may release it at once (after the device work it queues);
// the clock is read twice per batch, as on the baseline's side.
template <class Transform, class Use>
void device_batch_consumer(benchmark::State& state, Transform transform, Use use) {
  const long step = state.range(0);
  crema::double_buffered_pipeline pipe{crema::vector_source<image>(make_images()),
                                       std::move(transform), feed_options()};
  auto consumer = pipe.consumer(0);
  double consumer_ns = 0;
  decltype(consumer.pull()) previous;
  for (auto _ : state) {
    const double start = thread_cpu_ns();
    previous.reset();
    auto batch = consumer.pull();
    use(batch);
    consumer_ns += thread_cpu_ns() - start;
    training_step(step);
    previous = std::move(batch);
  }
  count_consumer(state, consumer_ns);
}

// The epilogue: each feed's consumer CPU per batch beside the baseline's, for both steps.
// `feeds` are the prefixes of crema's feeds ("crema", ...), `scenario` the name after them.
inline void print_consumer_ratios(const crema::bench::ratio_reporter& reporter,
                                  std::initializer_list<std::string_view> feeds,
                                  std::string_view scenario) {
  fmt::print(
      "\nconsumer thread CPU time per batch outside its training step (pull, collate, upload, "
      "release; target <= 0.10 of the baseline where the step lets producers keep up):\n");
  for (const long step : {0L, 200L}) {
    const std::string name = fmt::format("{}/step_us:{}/real_time", scenario, step);
    const double baseline_ns = reporter.counter("baseline/" + name, "consumer_cpu_ns");
    for (const std::string_view feed : feeds) {
      const double crema_ns = reporter.counter(fmt::format("{}/{}", feed, name), "consumer_cpu_ns");
      if (crema_ns <= 0 || baseline_ns <= 0) continue;
      fmt::print("  step {:>3} us: {} {:>9.0f} ns, baseline {:>9.0f} ns, ratio {:.3f}\n", step,
                 feed, crema_ns, baseline_ns, crema_ns / baseline_ns);
    }
  }
}

}  // namespace crema::bench::device_batches
