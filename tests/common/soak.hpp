#pragma once

// The soak's machinery (tests/pipeline/soak_test.cpp; in tests/cuda/, cuda_soak_test.cpp and
// nvjpeg_soak.hpp): pipelines of random shapes, stopped, destroyed under their consumers or run
// to the end of their pass, over a source and a transform that throw now and then, and the checks
// that hold over thousands of them: no record twice, every record once in a whole pass, and the
// process's heap (not under a sanitizer), threads and file descriptors flat after a warm-up.
#include <crema/pipeline/batch_uploader.hpp>
#include <crema/pipeline/device_batch.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/vector_source.hpp>

#include "common/sanitized.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace crema::test::soaking {

// What the process holds now: from /proc, and from glibc's allocator the heap's bytes in use.
struct process_usage {
  std::size_t resident_kib = 0;
  std::size_t heap_kib = 0;
  std::size_t threads = 0;
  std::size_t descriptors = 0;
};

inline std::size_t status_field(const char* name) {
  std::ifstream status("/proc/self/status");
  std::string key;
  while (status >> key) {
    if (key == name) {
      std::size_t value = 0;
      status >> value;
      return value;
    }
    status.ignore(1 << 16, '\n');
  }
  return 0;
}

inline process_usage usage_now() {
  process_usage now;
  now.resident_kib = status_field("VmRSS:");
  const struct mallinfo2 heap = mallinfo2();  // every arena's, and the chunks mapped alone
  now.heap_kib = (heap.uordblks + heap.hblkhd) / 1024;
  now.threads = status_field("Threads:");
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    ++now.descriptors;
  }
  return now;
}

// Numbers 0 .. count - 1 that throw when record `throw_at` is read (never if it is past the end).
class throwing_numbers {
 public:
  using record_type = std::uint32_t;
  static constexpr bool records_are_stable = true;

  throwing_numbers(std::uint32_t count, std::uint64_t throw_at)
      : inner_(numbers(count), "soak"), throw_at_(throw_at) {}

  const std::uint32_t* next() {
    if (inner_.position() == throw_at_) throw std::runtime_error("soak: the source fails");
    return inner_.next();
  }
  void rewind() { inner_.rewind(); }
  void shard(std::size_t rank, std::size_t world) { inner_.shard(rank, world); }
  [[nodiscard]] crema::record_position position() const { return inner_.position(); }
  void seek(crema::record_position position) { inner_.seek(position); }
  [[nodiscard]] std::string key() const { return inner_.key(); }

 private:
  static std::vector<std::uint32_t> numbers(std::uint32_t count) {
    std::vector<std::uint32_t> values(count);
    for (std::uint32_t i = 0; i < count; ++i) values[i] = i;
    return values;
  }
  crema::vector_source<std::uint32_t> inner_;
  std::uint64_t throw_at_;
};

enum class ending { end_of_pass, stop, destroy };

struct run_result {
  std::uint64_t delivered = 0;
  bool failed = false;
  bool exact = true;  // no record twice; with a whole pass, every record once
  // Batches that failed when their consumer read them (a device's error, where a test makes one)
  std::size_t other_errors = 0;
};

// A number from `low` to `high`, both included.
inline std::uint64_t pick(std::mt19937_64& draw, std::uint64_t low, std::uint64_t high) {
  return std::uniform_int_distribution<std::uint64_t>(low, high)(draw);
}

// The largest pipeline `one_run` draws: records in a pass, records in a batch, and batches
// consumer 0 takes before it stops a repeating one.
struct run_limits {
  std::uint32_t records = 30'000;
  std::size_t batch_size = 256;
  std::uint64_t stop_after = 40;
};

// One pipeline of a random shape, ended as `how` says, of at most `limits`. Its source is
// `make_source(records, throw_at)`, whose records are numbered 0 .. records - 1 in each pass and
// which throws when record `throw_at` is read (never if it is past the end); its transform
// `make_transform(consumers, throw_on)`, which throws on record `throw_on` (likewise).
// `first_pass(batch, visit)` visits the records of the batch's first pass and says whether the
// batch was intact.
template <class MakeSource, class MakeTransform, class FirstPass>
run_result one_run(std::mt19937_64& draw, ending how, const run_limits& limits,
                   MakeSource&& make_source, MakeTransform&& make_transform,
                   FirstPass&& first_pass) {
  const auto records = static_cast<std::uint32_t>(pick(draw, 1, limits.records));
  const bool source_throws = pick(draw, 0, 9) == 0;
  const bool transform_throws = pick(draw, 0, 9) == 0;
  const crema::pipeline_options options{.batch_size = pick(draw, 1, limits.batch_size),
                                        .prefetch = pick(draw, 1, 4),
                                        .producers = pick(draw, 1, 4),
                                        .threads = pick(draw, 1, 3),
                                        .consumers = pick(draw, 1, 2),
                                        .mode = how == ending::end_of_pass
                                                    ? crema::pipeline_mode::single_pass
                                                    : crema::pipeline_mode::repeat,
                                        .ordered = pick(draw, 0, 1) == 1};
  const std::uint64_t stop_after = pick(draw, 1, limits.stop_after);
  std::vector<std::vector<std::uint8_t>> seen(options.consumers,
                                              std::vector<std::uint8_t>(records, 0));
  std::atomic<std::uint64_t> delivered{0};
  std::atomic<bool> failed{false};
  std::atomic<bool> intact{true};
  std::atomic<std::size_t> other_errors{0};
  std::vector<std::thread> consumers;
  try {
    // A braced list is evaluated in order: the source's draws first.
    crema::double_buffered_pipeline pipe{
        make_source(records, source_throws ? pick(draw, 0, records - 1) : ~std::uint64_t{0}),
        make_transform(options.consumers,
                       transform_throws ? pick(draw, 0, records - 1) : ~std::uint64_t{0}),
        options};
    for (std::size_t c = 0; c < options.consumers; ++c) {
      consumers.emplace_back([&, c, consumer = pipe.consumer(c)]() mutable {
        try {
          std::uint64_t batches = 0;
          while (auto batch = consumer.pull()) {
            // A repeating run wraps: count the records of its first pass.
            try {
              if (!first_pass(*batch, [&](std::uint32_t record) {
                    if (seen[c][record] < 255) ++seen[c][record];
                  })) {
                intact = false;
              }
            } catch (const crema::error&) {
              // The batch failed (its device's error, where a test makes one): its records are
              // lost, and the pipeline goes on (docs/errors.md).
              failed = true;
              other_errors.fetch_add(1);
            }
            delivered.fetch_add(batch->size(), std::memory_order_relaxed);
            if (how == ending::stop && c == 0 && ++batches == stop_after) pipe.stop();
          }
        } catch (const crema::pipeline_error&) {
          failed = true;
        }
      });
    }
    if (how == ending::destroy)
      std::this_thread::sleep_for(std::chrono::microseconds(pick(draw, 0, 500)));
    if (how != ending::destroy) {
      for (auto& consumer : consumers) consumer.join();
    }
  }  // destroyed: consumers still pulling get an empty lease
  catch (const crema::error&) {
    failed = true;  // the pipeline could not be made (its slots' memory refused, say)
  }
  for (auto& consumer : consumers) {
    if (consumer.joinable()) consumer.join();
  }
  run_result result{delivered.load(), failed.load(), intact.load(), other_errors.load()};
  for (std::uint32_t record = 0; record < records; ++record) {
    std::size_t times = 0;
    for (const auto& one : seen) times += one[record];
    if (how == ending::end_of_pass) {
      if (times > 1 || (!result.failed && times != 1)) result.exact = false;
    } else if (times > 1) {
      result.exact = false;
    }
  }
  return result;
}

// `one_run` over the numbers 0 .. records - 1 (`throwing_numbers`), of the default limits.
template <class MakeTransform, class FirstPass>
run_result one_run(std::mt19937_64& draw, ending how, MakeTransform&& make_transform,
                   FirstPass&& first_pass) {
  return one_run(
      draw, how, run_limits{},
      [](std::uint32_t records, std::uint64_t throw_at) {
        return throwing_numbers(records, throw_at);
      },
      std::forward<MakeTransform>(make_transform), std::forward<FirstPass>(first_pass));
}

// Device batches, one device per consumer, whose uploads go on the consumer's stream, on a
// stream of each batch's own, or through the consumer's uploader (drawn per pipeline). A record
// fills its pixels and label with its number in its first pass, with -1 after. `Devices` gives
// each consumer's device resource (`resource(consumer)`).
enum class uploads_on { consumer_stream, own_stream, uploader };

template <class Batch, class Devices>
struct device_rig {
  using stream_type = typename Batch::stream_type;
  using uploader_type = batch_uploader<stream_type>;

  device_rig(std::size_t consumers, uploads_on how, Devices& each) : uploads(how), devices(&each) {
    for (std::size_t c = 0; c < consumers; ++c) {
      if constexpr (std::is_constructible_v<stream_type, int>) {  // on the consumer's device
        const int device = each.resource(c).device_id();
        streams.push_back(std::make_shared<stream_type>(device));
        uploaders.push_back(std::make_shared<uploader_type>(device));
      } else {
        streams.push_back(std::make_shared<stream_type>());
        uploaders.push_back(std::make_shared<uploader_type>());
      }
    }
  }
  // Waits for the streams' work; a stream of a device a test made fail answers with the failure,
  // which the pipeline has met already.
  void synchronize() {
    const auto wait = [](stream_type& stream) {
      try {
        stream.synchronize();
      } catch (const crema::error&) {
      }
    };
    for (const auto& stream : streams) wait(*stream);
    for (const auto& uploader : uploaders) wait(uploader->stream());
  }

  uploads_on uploads;
  Devices* devices;
  std::vector<std::shared_ptr<stream_type>> streams;
  std::vector<std::shared_ptr<uploader_type>> uploaders;
};

template <class Batch, class Devices>
struct throwing_fill {
  using batch_type = Batch;
  static constexpr record_shape shape{1, 2, 2};
  std::shared_ptr<device_rig<Batch, Devices>> rig;
  std::uint64_t throw_on = ~std::uint64_t{0};

  batch_type make_batch(const batch_context& where) const {
    auto device = rig->devices->resource(where.consumer);
    switch (rig->uploads) {
      case uploads_on::consumer_stream:
        return batch_type(where.batch_size, shape, rig->streams.at(where.consumer), {}, device);
      case uploads_on::uploader:
        return batch_type(where.batch_size, shape, rig->uploaders.at(where.consumer), {}, device);
      case uploads_on::own_stream:
        break;
    }
    return batch_type(where.batch_size, shape, {}, device);
  }
  void operator()(std::uint32_t record, batch_type& batch, const sample_context& context) const {
    if (record == throw_on) throw std::runtime_error("soak: the transform fails");
    const float value = context.epoch == 0 ? static_cast<float>(record) : -1.0f;
    const auto pixels = batch.record(context.index);
    std::fill(pixels.begin(), pixels.end(), value);
    batch.set_label(context.index, value);
  }
};

// Visits the records of `size` samples of `elements` values at `data` with their labels at
// `labels`, filled by `throwing_fill`, whose first pass they are of. False if a sample's pixels
// disagree with its label.
template <class Visit>
bool visit_filled(const float* data, const float* labels, std::size_t size, std::size_t elements,
                  Visit&& visit) {
  bool intact = true;
  for (std::size_t i = 0; i < size; ++i) {
    const float label = labels[i];
    const float* pixels = data + i * elements;
    if (!std::all_of(pixels, pixels + elements, [&](float value) { return value == label; })) {
      intact = false;
    } else if (label >= 0) {
      visit(static_cast<std::uint32_t>(label));
    }
  }
  return intact;
}

// A device batch's records, read from the device as a kernel would: device memory the host can
// read (an emulated device's, or the counting CUDA runtime's).
struct device_first_pass {
  template <class Batch, class Visit>
  bool operator()(const Batch& batch, Visit&& visit) const {
    const auto on_device = batch.device();  // waits for the upload
    return visit_filled(on_device.data.data(), on_device.labels.data(), batch.size(),
                        batch.shape().elements(), visit);
  }
};

// One pipeline of device batches (see `one_run`); `devices_for(consumers)` gives a `Devices*`
// for the pipeline's consumers, which must outlive the run; `first_pass` reads a batch back.
template <class Batch, class DevicesFor, class FirstPass = device_first_pass>
run_result device_run(std::mt19937_64& draw, ending how, DevicesFor&& devices_for,
                      FirstPass first_pass = {}) {
  using devices_type = std::remove_pointer_t<decltype(devices_for(std::size_t{1}))>;
  std::shared_ptr<device_rig<Batch, devices_type>> rig;
  const auto uploads = static_cast<uploads_on>(pick(draw, 0, 2));
  const run_result result = one_run(
      draw, how,
      [&](std::size_t consumers, std::uint64_t throw_on) {
        rig = std::make_shared<device_rig<Batch, devices_type>>(consumers, uploads,
                                                                *devices_for(consumers));
        return throwing_fill<Batch, devices_type>{rig, throw_on};
      },
      first_pass);
  rig->synchronize();
  return result;
}

// Runs pipelines, each made and ended by `run_one(draw, how)`, until `CREMA_SOAK_RECORDS`
// records (`records` unless set) and at least 60 pipelines have gone through, then checks what
// the soak promises; `run_one` returns its run's result, `other_errors` cleared where it made
// them happen.
template <class RunOne>
void soak(RunOne&& run_one, std::uint64_t records = 100'000'000) {
  using namespace std::chrono_literals;
  const char* asked = std::getenv("CREMA_SOAK_RECORDS");
  const std::uint64_t target = asked != nullptr ? std::strtoull(asked, nullptr, 10) : records;
  std::mt19937_64 draw(20261125);
  std::uint64_t delivered = 0;
  std::size_t runs = 0;
  std::size_t whole_passes = 0;
  std::size_t failures = 0;
  std::size_t inexact = 0;
  std::size_t other_errors = 0;
  process_usage warm{};
  const auto started = std::chrono::steady_clock::now();
  while (delivered < target || runs < 60) {
    const auto how = static_cast<ending>(pick(draw, 0, 2));
    const run_result result = run_one(draw, how);
    delivered += result.delivered;
    failures += result.failed ? 1 : 0;
    whole_passes += how == ending::end_of_pass && !result.failed ? 1 : 0;
    inexact += result.exact ? 0 : 1;
    other_errors += result.other_errors;
    if (++runs == 50) warm = usage_now();
  }
  // Joined threads leave /proc a moment later.
  process_usage after = usage_now();
  for (int i = 0; i < 100 && after.threads > warm.threads; ++i) {
    std::this_thread::sleep_for(10ms);
    after = usage_now();
  }
  MESSAGE(fmt::format(
      "{} records in {} runs ({} whole passes, {} failed on purpose) in {:.1f} s; heap {} -> {} "
      "KiB, resident {} -> {} KiB, threads {} -> {}, descriptors {} -> {}",
      delivered, runs, whole_passes, failures,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(),
      warm.heap_kib, after.heap_kib, warm.resident_kib, after.resident_kib, warm.threads,
      after.threads, warm.descriptors, after.descriptors));
  CHECK(inexact == 0);
  CHECK(other_errors == 0);
  CHECK(whole_passes > 0);
  CHECK(failures > 0);
  CHECK(after.threads <= warm.threads);
  CHECK(after.descriptors <= warm.descriptors);
#ifdef CREMA_TEST_SANITIZED
  // A sanitizer's allocator answers for itself (AddressSanitizer's quarantine alone keeps 256 MiB
  // of what was freed), and LeakSanitizer looks for leaks at exit: the bounds are for a build
  // without one.
  MESSAGE("memory not bounded under a sanitizer");
#else
  // A leak of a record, a slot or a decoder a run passes 2 MiB over thousands of runs.
  CHECK(after.heap_kib <= warm.heap_kib + 2 * 1024);
  // What the allocator keeps of the memory freed swings by 10 MiB and more from run to run
  // (threads' arenas, as each pipeline's threads happened to use them); memory taken outside it
  // is bounded here.
  CHECK(after.resident_kib <= warm.resident_kib + 64 * 1024);
#endif
}

}  // namespace crema::test::soaking
