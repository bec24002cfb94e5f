// Caffe's whole data layer as one pipeline: an LMDB of Datums (raw, float or encoded) is read,
// decoded, transformed and batched into device_batches that the producers upload once each; the
// values on the (emulated) device are the transform of each record, and the same seed gives the
// same bytes whatever the producer and thread counts.

#include <crema/io/caffe/caffe_batcher.hpp>
#include <crema/io/caffe/caffe_normalization.hpp>
#include <crema/io/caffe/datum.hpp>
#include <crema/io/image/image_codec.hpp>
#include <crema/io/image/image_window_decoder.hpp>
#include <crema/io/lmdb/lmdb_source.hpp>
#include <crema/io/lmdb/lmdb_writer.hpp>
#include <crema/pipeline/device_batch.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/host_batch.hpp>

#include "common/pipeline_failure.hpp"
#include "common/recording_device_resource.hpp"
#include "common/scratch_directory.hpp"
#include "common/test_data.hpp"
#include "common/watchdog.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <turbojpeg.h>

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
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
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
          const auto on_device = batch->device();
          const float* data = on_device.data.data();
          const float* on_device_labels = on_device.labels.data();
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
    // One upload of data and labels together per batch, by the producers.
    CHECK(rig.recorders[c].uploads().size() == batches[c]);
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
    const auto data = batch->device().data;
    const auto* bytes = reinterpret_cast<const unsigned char*>(data.data());
    for (std::size_t i = 0; i < batch->size() * batcher.shape().elements() * sizeof(float); ++i) {
      hash = (hash ^ bytes[i]) * 1099511628211ULL;
    }
  }
  return hash;
}

// The error that stops a pass over the LMDB at `path` through `batcher`, with its cause.
template <class Batcher>
std::string error_of(const fs::path& path, const Batcher& batcher) {
  crema::double_buffered_pipeline pipe{crema::lmdb_source(path), batcher, {.batch_size = 4}};
  try {
    for (auto batch : pipe.consumer(0)) (void)batch;
  } catch (const crema::pipeline_error& error) {
    return fmt::format("{} / {}", error.what(), crema::test::nested_message(error));
  }
  FAIL("the pass ended without an error");
  return {};
}

template <class Decoder = crema::no_image_decoder>
std::string error_of_pass(const fs::path& path, Decoder decoder = {}) {
  devices rig(1);
  return error_of(path, crema::caffe_batcher({channels, side, side}, training_transform(),
                                             rig.maker(), std::move(decoder)));
}

// JPEG Datums of `height` x `width` cut from the committed photographs at many places, encoded
// in turn 4:2:0, 4:2:2, 4:4:4, gray and progressive 4:2:0; label = index.
fs::path make_jpeg_dataset(const fs::path& path, std::size_t count, std::size_t height,
                           std::size_t width) {
  crema::image_decoder decoder({.channels = 3, .order = crema::channel_order::rgb});
  std::vector<std::vector<std::uint8_t>> photographs;
  std::vector<crema::record_shape> sizes;
  for (const char* name : {"astronaut.jpg", "coffee.jpg"}) {
    const auto view = decoder.decode(crema::test::read_bytes(crema::test::test_data(name)), name);
    photographs.emplace_back(view.data, view.data + view.elements());
    sizes.push_back({3, view.height, view.width});
  }
  crema::lmdb_writer writer(path);
  std::vector<std::byte> value;
  std::vector<std::uint8_t> cut(height * width * 3);
  for (std::size_t i = 0; i < count; ++i) {
    const auto& photo = photographs[i % 2];
    const crema::record_shape size = sizes[i % 2];
    const std::size_t top = (i * 37) % (size.height - height + 1);
    const std::size_t left = (i * 53) % (size.width - width + 1);
    for (std::size_t r = 0; r < height; ++r) {
      std::memcpy(cut.data() + r * width * 3, photo.data() + ((top + r) * size.width + left) * 3,
                  width * 3);
    }
    const int kinds[] = {TJSAMP_420, TJSAMP_422, TJSAMP_444, TJSAMP_GRAY, TJSAMP_420};
    const int flags = i % 5 == 4 ? TJFLAG_PROGRESSIVE : 0;
    // A handle of its own for each image: TurboJPEG 2.1.5 writes corrupt Huffman codes with a
    // handle that made a progressive JPEG before.
    tjhandle handle = tjInitCompress();
    unsigned char* encoded = nullptr;
    unsigned long encoded_size = 0;
    REQUIRE(tjCompress2(handle, cut.data(), static_cast<int>(width), 0, static_cast<int>(height),
                        TJPF_RGB, &encoded, &encoded_size, kinds[i % 5], 90, flags) == 0);
    const std::vector<std::byte> jpeg(reinterpret_cast<const std::byte*>(encoded),
                                      reinterpret_cast<const std::byte*>(encoded) + encoded_size);
    tjFree(encoded);
    tjDestroy(handle);
    value.clear();
    crema::encode_datum({.label = static_cast<std::int32_t>(i), .encoded = true, .data = jpeg},
                        value);
    writer.put(key_of(i), value);
  }
  writer.finish();
  return path;
}

// One ordered pass over the LMDB at `path` through `batcher` (batches of 8, 2 producers, seed
// 5): `read(batch)` for each batch, in order.
template <class Batcher, class Read>
void ordered_pass(const fs::path& path, const Batcher& batcher, Read read) {
  crema::double_buffered_pipeline pipe{crema::lmdb_source(path),
                                       batcher,
                                       {.batch_size = 8,
                                        .producers = 2,
                                        .threads = 2,
                                        .mode = crema::pipeline_mode::single_pass,
                                        .ordered = true,
                                        .seed = 5}};
  for (auto batch : pipe.consumer(0)) read(batch);
}

// Every value of one ordered pass over an LMDB of encoded Datums, decoded by `decoder`.
template <class Decoder>
std::vector<float> values_of_pass(const fs::path& path, const crema::caffe_transform& transform,
                                  Decoder decoder, crema::record_shape input) {
  crema::caffe_batcher batcher(input, transform, crema::make_host_batch<float>{},
                               std::move(decoder));
  std::vector<float> values;
  ordered_pass(path, batcher, [&](auto& batch) {
    values.insert(values.end(), batch->data.begin(),
                  batch->data.begin() +
                      static_cast<std::ptrdiff_t>(batch->size() * batcher.shape().elements()));
  });
  return values;
}

// The same pass into device batches of bytes (the crop and mirror) on the emulated device, their
// values normalised on the host as the device would (`caffe_normalize_on_host`), and the labels.
template <class Decoder>
std::pair<std::vector<float>, std::vector<float>> byte_values_of_pass(
    const fs::path& path, const crema::caffe_transform& transform, Decoder decoder,
    crema::record_shape input) {
  using byte_batch = crema::device_batch<std::uint8_t>;
  crema::caffe_batcher batcher(
      input, transform,
      [](const crema::batch_context& where, crema::record_shape shape) {
        return byte_batch(where.batch_size, shape);
      },
      std::move(decoder));
  const crema::caffe_normalization normalization = transform.normalization();
  std::vector<float> values;
  std::vector<float> labels;
  ordered_pass(path, batcher, [&](auto& batch) {
    const auto on_device = batch->device();
    std::vector<float> normalised(on_device.data.size());
    crema::caffe_normalize_on_host({on_device.data.data(), on_device.data.size()}, normalised,
                                   batcher.shape(), normalization);
    values.insert(values.end(), normalised.begin(), normalised.end());
    labels.insert(labels.end(), on_device.labels.data(),
                  on_device.labels.data() + on_device.labels.size());
  });
  return {std::move(values), std::move(labels)};
}

}  // namespace

TEST_SUITE("caffe data layer") {
  TEST_CASE(
      "batches of bytes hold the crop and mirror: normalised, they are the float batches bit for "
      "bit, and their labels pass 255") {
    crema::test::watchdog guard(120s, "data layer bytes");
    const std::vector<crema::caffe_transform_options> cases = {
        {.crop_size = 6,
         .mirror = true,
         .training = true,
         .scale = 0.0125f,
         .mean_values = {104.0f, 117.0f, 123.0f}},
        {.crop_size = 5, .training = false, .scale = 0.5f, .mean_values = {100.0f}},
        {.mirror = true, .training = true}};
    {
      scratch_directory scratch("layer-bytes-raw");
      const auto path = make_dataset(scratch.path(), 300, kind::mixed);  // raw, PNG, float
      scratch_directory pixels_only("layer-bytes-raw-only");
      const auto raw = make_dataset(pixels_only.path(), 300, kind::raw);
      for (const auto& options : cases) {
        CAPTURE(options.crop_size);
        const crema::caffe_transform transform(options);
        const crema::record_shape input{channels, side, side};
        const auto floats = values_of_pass(raw, transform, crema::image_decoder{}, input);
        const auto [bytes, labels] =
            byte_values_of_pass(raw, transform, crema::no_image_decoder{}, input);
        REQUIRE(bytes.size() == floats.size());
        CHECK(std::memcmp(bytes.data(), floats.data(), floats.size() * sizeof(float)) == 0);
        std::vector<float> indices(300);
        std::iota(indices.begin(), indices.end(), 0.0f);
        CHECK(labels == indices);
      }
      // A float record cannot go into bytes: the error names it.
      const std::string what =
          error_of(path, crema::caffe_batcher(
                             {channels, side, side}, training_transform(),
                             [](const crema::batch_context& where, crema::record_shape shape) {
                               return crema::device_batch<std::uint8_t>(where.batch_size, shape);
                             },
                             crema::image_decoder{}));
      CHECK(what.find(key_of(2)) != std::string::npos);  // the first float record
      CHECK(what.find("float values") != std::string::npos);
    }
    {
      constexpr std::size_t height = 45;
      constexpr std::size_t width = 61;
      scratch_directory scratch("layer-bytes-jpeg");
      const auto path = make_jpeg_dataset(scratch.path(), 40, height, width);
      const crema::record_shape input{3, height, width};
      for (auto options : cases) {
        options.crop_size = options.crop_size == 0 ? 0 : 32;
        CAPTURE(options.crop_size);
        const crema::caffe_transform transform(options);
        const auto floats = values_of_pass(
            path, transform,
            crema::image_decoder({.channels = 3, .order = crema::channel_order::bgr}), input);
        const auto whole = byte_values_of_pass(
            path, transform,
            crema::image_decoder({.channels = 3, .order = crema::channel_order::bgr}), input);
        const auto windows = byte_values_of_pass(
            path, transform,
            crema::image_window_decoder(
                {.channels = 3, .order = crema::channel_order::bgr, .band_rows = 7}),
            input);
        REQUIRE(whole.first.size() == floats.size());
        CHECK(std::memcmp(whole.first.data(), floats.data(), floats.size() * sizeof(float)) == 0);
        REQUIRE(windows.first.size() == floats.size());
        CHECK(std::memcmp(windows.first.data(), floats.data(), floats.size() * sizeof(float)) == 0);
      }
    }
  }

  TEST_CASE(
      "host batches of bytes keep labels past 255, and a label float labels cannot hold exactly "
      "stops the pass, naming its key") {
    crema::test::watchdog guard(60s, "data layer labels");
    scratch_directory scratch("layer-labels");
    const auto path = make_dataset(scratch.path(), 300, kind::raw);
    const crema::caffe_batcher bytes({channels, side, side}, training_transform(),
                                     crema::make_host_batch<std::uint8_t>{});
    static_assert(std::is_same_v<decltype(bytes)::label_type, float>);
    std::vector<float> labels;
    ordered_pass(path, bytes, [&](auto& batch) {
      labels.insert(labels.end(), batch->labels.begin(),
                    batch->labels.begin() + static_cast<std::ptrdiff_t>(batch->size()));
    });
    std::vector<float> indices(300);
    std::iota(indices.begin(), indices.end(), 0.0f);
    CHECK(labels == indices);

    {
      // 2^24 + 1: a float holds 2^24 in its place, another class.
      crema::lmdb_writer writer(path);
      const auto pixels = pixels_of(7);
      std::vector<std::byte> value;
      crema::encode_datum({.channels = channels,
                           .height = side,
                           .width = side,
                           .label = (1 << 24) + 1,
                           .data = std::as_bytes(std::span<const std::uint8_t>(pixels))},
                          value);
      writer.put(key_of(7), value);
    }
    for (const std::string& what :
         {error_of(path, bytes),
          error_of(path, crema::caffe_batcher({channels, side, side}, training_transform(),
                                              crema::make_host_batch<float>{}))}) {
      CHECK(what.find(key_of(7)) != std::string::npos);
      CHECK(what.find("label 16777217 is not exact in the batch's 32-bit float labels") !=
            std::string::npos);
    }
  }

  TEST_CASE(
      "a transform with a mean file, or more channel means than a kernel takes, is refused "
      "for batches of bytes") {
    auto mean = std::make_shared<crema::blob>();
    mean->shape = {1, channels, side, side};
    mean->data.assign(channels * side * side, 1.0f);
    const auto bytes = [](const crema::batch_context& where, crema::record_shape shape) {
      return crema::device_batch<std::uint8_t>(where.batch_size, shape);
    };
    CHECK_THROWS_WITH_AS(crema::caffe_batcher({channels, side, side},
                                              crema::caffe_transform({.mean_file = mean}), bytes),
                         doctest::Contains("mean file"), crema::config_error);
    CHECK_THROWS_WITH_AS(
        crema::caffe_batcher({5, side, side},
                             crema::caffe_transform({.mean_values = {1, 2, 3, 4, 5}}), bytes),
        doctest::Contains("5 mean values"), crema::config_error);
    // The float path takes both.
    CHECK_NOTHROW(crema::caffe_batcher({channels, side, side},
                                       crema::caffe_transform({.mean_file = mean}),
                                       crema::make_host_batch<float>{}));
  }

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
      check_one_pass(
          path, training_transform(),
          crema::image_window_decoder({.channels = 0, .order = crema::channel_order::bgr}), 75, 1);
    }
  }

  TEST_CASE(
      "JPEG Datums decoded only in their crop, row band by row band, give the bytes of a whole "
      "decode, for every crop, mirror, mean and subsampling") {
    crema::test::watchdog guard(120s, "data layer windows");
    constexpr std::size_t height = 45;
    constexpr std::size_t width = 61;
    scratch_directory scratch("layer-windows");
    const auto path = make_jpeg_dataset(scratch.path(), 60, height, width);
    auto mean = std::make_shared<crema::blob>();
    mean->shape = {1, 3, height, width};
    for (std::size_t i = 0; i < 3 * height * width; ++i) {
      mean->data.push_back(static_cast<float>(i % 251) * 0.5f);
    }
    std::vector<crema::caffe_transform_options> cases = {
        {.crop_size = 32,
         .mirror = true,
         .training = true,
         .scale = 0.017f,
         .mean_values = {104.0f, 117.0f, 123.0f}},
        {.crop_size = 40, .mirror = true, .training = true, .mean_file = mean},
        {.crop_size = 17, .training = false, .scale = 0.5f, .mean_values = {100.0f}},
        {.mirror = true, .training = true}};
    const crema::record_shape input{3, height, width};
    for (const auto& options : cases) {
      CAPTURE(options.crop_size);
      const crema::caffe_transform transform(options);
      const auto whole = values_of_pass(
          path, transform,
          crema::image_decoder({.channels = 3, .order = crema::channel_order::bgr}), input);
      const auto windows =
          values_of_pass(path, transform,
                         crema::image_window_decoder(
                             {.channels = 3, .order = crema::channel_order::bgr, .band_rows = 7}),
                         input);
      REQUIRE(whole.size() == 60 * transform.output_shape(3, height, width).elements());
      CHECK(windows.size() == whole.size());
      CHECK(std::memcmp(windows.data(), whole.data(), whole.size() * sizeof(float)) == 0);
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
      const auto on_device = batch->device();
      const float* data = on_device.data.data();
      const float* labels = on_device.labels.data();
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
