// Caffe's whole data layer as one pipeline: an LMDB of Datums (raw, float or encoded) is read,
// decoded, transformed and batched into device_batches that the producers upload once each; the
// values on the (emulated) device are the transform of each record, and the same seed gives the
// same bytes whatever the producer and thread counts.

#include <crema/io/caffe_batcher.hpp>
#include <crema/io/datum.hpp>
#include <crema/io/image/image_codec.hpp>
#include <crema/io/lmdb/lmdb_source.hpp>
#include <crema/io/lmdb/lmdb_writer.hpp>
#include <crema/pipeline/device_batch.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include "common/recording_device_resource.hpp"
#include "common/scratch_directory.hpp"
#include "common/watchdog.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <filesystem>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr std::size_t channels = 3;
constexpr std::size_t side = 8;

using batch_type =
    crema::device_batch<float, crema::host_malloc_resource, crema::test::recording_device_resource>;

using crema::test::scratch_directory;

std::string key_of(std::size_t i) { return fmt::format("{:08}_img{}.png", i, i); }

// Record i's pixels, channel-first.
std::vector<std::uint8_t> pixels_of(std::size_t i) {
  std::vector<std::uint8_t> pixels(channels * side * side);
  for (std::size_t p = 0; p < pixels.size(); ++p) {
    pixels[p] = static_cast<std::uint8_t>((p * 13 + i * 29) % 256);
  }
  return pixels;
}

enum class kind { raw, png, floats, mixed };

// `count` records of kind `k` (mixed: raw, PNG and float in turn), label = index.
fs::path make_dataset(const fs::path& path, std::size_t count, kind k) {
  crema::lmdb_writer writer(path);
  std::vector<std::byte> value;
  for (std::size_t i = 0; i < count; ++i) {
    const auto pixels = pixels_of(i);
    const kind this_one = k == kind::mixed ? static_cast<kind>(i % 3) : k;
    value.clear();
    crema::datum_fields fields{
        .channels = channels, .height = side, .width = side, .label = static_cast<std::int32_t>(i)};
    std::vector<std::byte> png;
    std::vector<float> floats;
    if (this_one == kind::png) {
      crema::encode_png(
          crema::image_view<std::uint8_t>::planar(pixels.data(), channels, side, side), png);
      fields.encoded = true;
      fields.data = png;
    } else if (this_one == kind::floats) {
      floats.assign(pixels.begin(), pixels.end());
      fields.float_data = floats;
    } else {
      fields.data = std::as_bytes(std::span<const std::uint8_t>(pixels));
    }
    crema::encode_datum(fields, value);
    writer.put(key_of(i), value);
  }
  writer.finish();
  return path;
}

// What record i becomes in a batch: the transform of its pixels with its own generator.
std::vector<float> expected_of(const crema::caffe_transform& transform, std::size_t i,
                               std::uint64_t seed, std::uint64_t epoch,
                               crema::record_position position) {
  const auto pixels = pixels_of(i);
  const auto shape = transform.output_shape(channels, side, side);
  std::vector<float> out(shape.elements());
  crema::sample_rng rng(seed, epoch, position);
  transform(crema::image_view<std::uint8_t>::planar(pixels.data(), channels, side, side),
            std::span<float>(out), rng);
  return out;
}

// The consumers' devices and upload streams, and how a batcher makes its batches on them.
struct devices {
  explicit devices(std::size_t consumers) : emulated(consumers) {
    for (std::size_t c = 0; c < consumers; ++c) {
      streams.push_back(std::make_shared<crema::emulated_stream>());
      recorders.emplace_back(emulated[c]);
    }
  }
  [[nodiscard]] auto maker() const {
    return [this](const crema::batch_context& where, crema::record_shape shape) {
      return batch_type(where.batch_size, shape, streams.at(where.consumer), {},
                        recorders.at(where.consumer));
    };
  }
  std::deque<crema::emulated_device> emulated;
  std::vector<std::shared_ptr<crema::emulated_stream>> streams;
  std::vector<crema::test::recording_device_resource> recorders;
};

crema::caffe_transform training_transform() {
  return crema::caffe_transform({.crop_size = 6,
                                 .mirror = true,
                                 .training = true,
                                 .scale = 0.0125f,
                                 .mean_values = {104.0f, 117.0f, 123.0f}});
}

bool same_bits(const float* a, const std::vector<float>& b) {
  return std::memcmp(a, b.data(), b.size() * sizeof(float)) == 0;
}

// Reads one single pass through the data layer with `consumers` consumers; checks every record's
// values on the device against the transform of its pixels; returns the labels seen and the
// uploads per batch.
template <class Decoder>
void check_one_pass(const fs::path& path, crema::caffe_transform transform, Decoder decoder,
                    std::size_t records, std::size_t consumers) {
  devices rig(consumers);
  const crema::caffe_transform reference = transform;
  crema::caffe_batcher batcher({channels, side, side}, std::move(transform), rig.maker(),
                               std::move(decoder));
  const std::size_t elements = batcher.shape().elements();
  constexpr std::uint64_t seed = 2026;
  std::mutex mutex;
  std::vector<std::size_t> labels;
  std::vector<std::size_t> batches(consumers);
  std::size_t wrong = 0;
  {
    crema::double_buffered_pipeline pipe{crema::lmdb_source(path),
                                         batcher,
                                         {.batch_size = 16,
                                          .prefetch = 3,
                                          .producers = 3,
                                          .threads = 2,
                                          .consumers = consumers,
                                          .mode = crema::pipeline_mode::single_pass,
                                          .seed = seed}};
    std::vector<std::thread> threads;
    for (std::size_t c = 0; c < consumers; ++c) {
      threads.emplace_back([&, c] {
        for (auto batch : pipe.consumer(c)) {
          const float* data = batch->data.device().data();
          const float* on_device_labels = batch->labels.device().data();
          std::scoped_lock lock(mutex);
          ++batches[c];
          for (std::size_t i = 0; i < batch->size(); ++i) {
            const auto label = static_cast<std::size_t>(on_device_labels[i]);
            labels.push_back(label);
            // A pass reads in order: the record at position p is record p.
            const auto expected =
                expected_of(reference, label, seed, batch.epoch(), batch.first_position() + i);
            if (label != batch.first_position() + i || !same_bits(data + i * elements, expected)) {
              ++wrong;
            }
          }
        }
      });
    }
    for (auto& thread : threads) thread.join();
  }
  CHECK(wrong == 0);
  std::sort(labels.begin(), labels.end());
  std::vector<std::size_t> all(records);
  std::iota(all.begin(), all.end(), std::size_t{0});
  CHECK(labels == all);
  for (std::size_t c = 0; c < consumers; ++c) {
    // One upload of the data and one of the labels per batch, by the producers.
    CHECK(rig.recorders[c].uploads().size() == 2 * batches[c]);
  }
}

// A hash of every delivered batch's bytes, in delivery order.
std::uint64_t checksum_of_pass(const fs::path& path, std::size_t producers, std::size_t threads) {
  devices rig(1);
  crema::caffe_batcher batcher({channels, side, side}, training_transform(), rig.maker());
  crema::double_buffered_pipeline pipe{crema::lmdb_source(path, {.shuffle_buffer = 32, .seed = 3}),
                                       batcher,
                                       {.batch_size = 16,
                                        .producers = producers,
                                        .threads = threads,
                                        .mode = crema::pipeline_mode::single_pass,
                                        .ordered = true,
                                        .seed = 11}};
  std::uint64_t hash = 1469598103934665603ULL;
  for (auto batch : pipe.consumer(0)) {
    const auto data = batch->data.device();
    const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
    for (std::size_t i = 0; i < batch->size() * batcher.shape().elements() * sizeof(float); ++i) {
      hash = (hash ^ bytes[i]) * 1099511628211ULL;
    }
  }
  return hash;
}

template <class Decoder = crema::no_image_decoder>
std::string error_of_pass(const fs::path& path, Decoder decoder = {}) {
  devices rig(1);
  crema::caffe_batcher batcher({channels, side, side}, training_transform(), rig.maker(),
                               std::move(decoder));
  crema::double_buffered_pipeline pipe{crema::lmdb_source(path), batcher, {.batch_size = 4}};
  try {
    for (auto batch : pipe.consumer(0)) (void)batch;
  } catch (const crema::pipeline_error& error) {
    std::string message = error.what();
    try {
      std::rethrow_if_nested(error);
    } catch (const std::exception& cause) {
      message += fmt::format(" / {}", cause.what());
    }
    return message;
  }
  FAIL("the pass ended without an error");
  return {};
}

}  // namespace

TEST_SUITE("caffe data layer") {
  TEST_CASE(
      "raw Datums reach the device transformed, each batch uploaded once, for 1 and 2 "
      "consumers") {
    crema::test::watchdog guard(60s, "data layer raw");
    scratch_directory scratch("layer-raw");
    const auto path = make_dataset(scratch.path(), 203, kind::raw);
    check_one_pass(path, training_transform(), crema::no_image_decoder{}, 203, 1);
    check_one_pass(path, training_transform(), crema::no_image_decoder{}, 203, 2);
  }

  TEST_CASE("PNG, float and mixed records give the values raw ones give") {
    crema::test::watchdog guard(60s, "data layer encoded");
    for (const kind k : {kind::png, kind::floats, kind::mixed}) {
      CAPTURE(static_cast<int>(k));
      scratch_directory scratch("layer-kinds");
      const auto path = make_dataset(scratch.path(), 75, k);
      check_one_pass(path, training_transform(), crema::image_decoder{}, 75, 1);
    }
  }

  TEST_CASE("the same seed gives the same bytes whatever the producer and thread counts") {
    crema::test::watchdog guard(60s, "data layer determinism");
    scratch_directory scratch("layer-determinism");
    const auto path = make_dataset(scratch.path(), 300, kind::raw);
    const std::uint64_t one = checksum_of_pass(path, 1, 1);
    CHECK(checksum_of_pass(path, 3, 2) == one);
    CHECK(checksum_of_pass(path, 4, 1) == one);
  }

  TEST_CASE("the input shape can be read off the first record, encoded or not") {
    scratch_directory scratch("layer-shape");
    const auto path = make_dataset(scratch.path(), 3, kind::mixed);
    crema::lmdb_source source(path);
    crema::image_decoder decoder;
    for (int i = 0; i < 3; ++i) {
      const crema::lmdb_record* record = source.next();
      CHECK(crema::datum_shape(record->value, record->key_text(), decoder) ==
            crema::record_shape{channels, side, side});
    }
  }

  TEST_CASE(
      "an encoded record without a decoder, a record of another shape and a corrupt "
      "record stop the pass, naming the key") {
    crema::test::watchdog guard(60s, "data layer errors");
    {
      scratch_directory scratch("layer-no-decoder");
      const auto path = make_dataset(scratch.path(), 10, kind::png);
      const std::string what = error_of_pass(path);
      CHECK(what.find(key_of(0)) != std::string::npos);
      CHECK(what.find("no image decoder") != std::string::npos);
    }
    {
      scratch_directory scratch("layer-shape-error");
      const auto path = make_dataset(scratch.path(), 10, kind::raw);
      {
        crema::lmdb_writer writer(path);
        std::vector<std::byte> value;
        const std::vector<std::byte> small(3 * 4 * 4);
        crema::encode_datum({.channels = 3, .height = 4, .width = 4, .label = 1, .data = small},
                            value);
        writer.put(key_of(6), value);
      }
      const std::string what = error_of_pass(path);
      CHECK(what.find(key_of(6)) != std::string::npos);
      CHECK(what.find("smaller than the crop 6") != std::string::npos);
    }
    {
      scratch_directory scratch("layer-corrupt-png");
      const auto path = make_dataset(scratch.path(), 10, kind::png);
      {
        crema::lmdb_writer writer(path);
        std::vector<std::byte> value;
        const std::vector<std::byte> not_png(40, std::byte{0x89});
        crema::encode_datum({.channels = 3, .label = 1, .encoded = true, .data = not_png}, value);
        writer.put(key_of(3), value);
      }
      const std::string what = error_of_pass(path, crema::image_decoder{});
      CHECK(what.find(key_of(3)) != std::string::npos);
      CHECK(what.find("neither a JPEG nor a PNG") != std::string::npos);
    }
  }

  TEST_CASE("a padded last batch is full on the device, its repeats transformed as the first") {
    crema::test::watchdog guard(60s, "data layer padding");
    scratch_directory scratch("layer-pad");
    const auto path = make_dataset(scratch.path(), 20, kind::raw);
    devices rig(1);
    crema::caffe_batcher batcher({channels, side, side}, training_transform(), rig.maker());
    crema::double_buffered_pipeline pipe{crema::lmdb_source(path),
                                         batcher,
                                         {.batch_size = 16,
                                          .mode = crema::pipeline_mode::single_pass,
                                          .last_batch = crema::partial_batch::pad,
                                          .seed = 1}};
    std::vector<std::size_t> sizes;
    for (auto batch : pipe.consumer(0)) {
      sizes.push_back(batch->size());
      if (batch.padding() == 0) continue;
      CHECK(batch.padding() == 12);
      const float* data = batch->data.device().data();
      const float* labels = batch->labels.device().data();
      const std::size_t elements = batcher.shape().elements();
      for (std::size_t i = 4; i < 16; ++i) {
        CHECK(labels[i] == labels[i % 4]);
        CHECK(std::memcmp(data + i * elements, data + (i % 4) * elements,
                          elements * sizeof(float)) == 0);
      }
    }
    CHECK(sizes == std::vector<std::size_t>{16, 16});
  }
}
