// What the image input promises about allocation, counted: once its buffers have grown, a
// pipeline of JPEG files or of encoded Datums allocates nothing per image beyond the pools that
// libjpeg itself allocates for every image it decodes (measured here on a plain libjpeg loop over
// the same files). A program of its own: it counts every malloc call, on every thread
// (common/malloc_counter.hpp; not under a sanitizer).

#include <crema/io/caffe/caffe_batcher.hpp>
#include <crema/io/image/image_batcher.hpp>
#include <crema/io/image/image_codec.hpp>
#include <crema/io/image/image_folder_source.hpp>
#include <crema/io/image/image_window_decoder.hpp>
#include <crema/io/lmdb/lmdb_source.hpp>
#include <crema/io/lmdb/lmdb_writer.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/host_batch.hpp>

#include "common/malloc_counter.hpp"
#include "common/scratch_directory.hpp"
#include "common/test_data.hpp"
#include "common/watchdog.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <jpeglib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#ifndef CREMA_TEST_SANITIZED
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using crema::test::mallocs;
using crema::test::mallocs_on_this_thread;

// JPEGs of several sizes cut from the committed photographs, in three class folders.
std::vector<std::vector<std::byte>> make_folder(const fs::path& root) {
  crema::image_decoder decoder({.channels = 3, .order = crema::channel_order::rgb});
  std::vector<std::vector<std::byte>> files;
  std::size_t index = 0;
  for (const char* name : {"astronaut.jpg", "coffee.jpg"}) {
    const auto view = decoder.decode(crema::test::read_bytes(crema::test::test_data(name)), name);
    const std::vector<std::uint8_t> photo(view.data, view.data + view.elements());
    for (const std::size_t side : {120U, 150U, 171U}) {
      for (std::size_t at = 0; at < 4; ++at, ++index) {
        const std::size_t width = std::min<std::size_t>(view.width, side + 40);
        std::vector<std::uint8_t> cut(side * width * 3);
        for (std::size_t r = 0; r < side; ++r) {
          const std::size_t top = (at * 7) % (view.height - side + 1);
          std::copy_n(photo.data() + ((top + r) * view.width) * 3, width * 3,
                      cut.data() + r * width * 3);
        }
        std::vector<std::byte> bytes;
        crema::encode_jpeg(crema::image_view<std::uint8_t>::interleaved(cut.data(), 3, side, width),
                           90, bytes, crema::channel_order::rgb);
        const fs::path folder = root / fmt::format("class{}", index % 3);
        fs::create_directories(folder);
        std::ofstream(folder / fmt::format("image{:02}.jpg", index), std::ios::binary)
            .write(reinterpret_cast<const char*>(bytes.data()),
                   static_cast<std::streamsize>(bytes.size()));
        files.push_back(std::move(bytes));
      }
    }
  }
  return files;
}

// Mallocs per image of a plain libjpeg loop (one decompressor, reused) over `files`, warm.
double libjpeg_mallocs_per_image(const std::vector<std::vector<std::byte>>& files) {
  jpeg_decompress_struct info{};
  jpeg_error_mgr errors{};
  info.err = jpeg_std_error(&errors);
  jpeg_create_decompress(&info);
  std::vector<unsigned char> row;
  std::size_t before = 0;
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) before = mallocs.load();
    for (const auto& file : files) {
      jpeg_mem_src(&info, reinterpret_cast<const unsigned char*>(file.data()), file.size());
      jpeg_read_header(&info, TRUE);
      jpeg_start_decompress(&info);
      row.resize(std::size_t{info.output_width} * info.output_components);
      JSAMPROW pointer = row.data();
      while (info.output_scanline < info.output_height) jpeg_read_scanlines(&info, &pointer, 1);
      jpeg_finish_decompress(&info);
    }
  }
  const std::size_t made = mallocs.load() - before;
  jpeg_destroy_decompress(&info);
  return static_cast<double>(made) / static_cast<double>(files.size());
}

// Waits until every producer is suspended for a slot and none is free: no image is being
// decoded, and every one decoded is counted in `records_produced`.
template <class Pipe>
void wait_until_full(const Pipe& pipe, std::size_t producers) {
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  for (;;) {
    const auto stats = pipe.stats();
    if (stats.free_slots == 0 && stats.waiting_producers == producers) return;
    REQUIRE(std::chrono::steady_clock::now() < deadline);
    std::this_thread::sleep_for(1ms);
  }
}

// Mallocs per image decoded while the consumer pulls `batches` batches, after as many to warm
// up; the consumer's own (its pulls and the snapshots) left out. The fewest of three such
// windows: the lock-free queues grow once in a while (a thread's first enqueue registers it with
// a queue, which allocates), at moments that follow the schedule, so one window under load may
// hold such a one-off; an allocation per image or per batch is in every window.
template <class Pipe>
double mallocs_per_image(Pipe& pipe, std::size_t producers, std::size_t batches) {
  auto consumer = pipe.consumer(0);
  for (std::size_t i = 0; i < batches; ++i) REQUIRE(consumer.pull());
  wait_until_full(pipe, producers);
  double fewest = std::numeric_limits<double>::infinity();
  for (int window = 0; window < 3; ++window) {
    const std::uint64_t decoded_before = pipe.stats().records_produced;
    const std::size_t before = mallocs.load() - mallocs_on_this_thread;
    for (std::size_t i = 0; i < batches; ++i) REQUIRE(consumer.pull());
    wait_until_full(pipe, producers);
    const std::size_t made = mallocs.load() - mallocs_on_this_thread - before;
    const std::uint64_t decoded = pipe.stats().records_produced - decoded_before;
    REQUIRE(decoded >= batches);
    fewest = std::min(fewest, static_cast<double>(made) / static_cast<double>(decoded));
  }
  return fewest;
}

}  // namespace
#endif

TEST_SUITE("image allocation") {
  TEST_CASE(
      "JPEG files and encoded Datums allocate nothing per image in steady state beyond "
      "libjpeg's own pools") {
#ifdef CREMA_TEST_SANITIZED
    std::printf("crema-test-skip: counting malloc calls needs a build without a sanitizer\n");
#else
    crema::test::watchdog guard(120s, "image allocation");
    crema::test::scratch_directory scratch("image-allocation");
    const auto files = make_folder(scratch.path() / "images");
    const double libjpeg = libjpeg_mallocs_per_image(files);
    MESSAGE("libjpeg allocates " << libjpeg << " times per image it decodes");
    CHECK(libjpeg > 0);  // the pools are per image: what the rest is compared with

    {
      crema::image_batcher batcher(
          crema::image_transform({.geometry = crema::resize_center_crop{96, 64, 64},
                                  .mirror = true,
                                  .jitter = {.brightness = 0.2F, .contrast = 0.2F},
                                  .mean = {0.5F, 0.5F, 0.5F},
                                  .std = {0.25F, 0.25F, 0.25F}}),
          crema::make_host_batch<float>{});
      crema::double_buffered_pipeline pipe{
          crema::image_folder_source(scratch.path() / "images"),
          batcher,
          {.batch_size = 8, .producers = 2, .threads = 2, .seed = 3}};
      const double per_image = mallocs_per_image(pipe, 2, 60);
      MESSAGE("the folder pipeline allocates " << per_image << " times per image");
      CHECK(per_image <= libjpeg);
    }
    {
      const fs::path db = scratch.path() / "db";
      {
        crema::lmdb_writer writer(db);
        std::vector<std::byte> value;
        for (std::size_t i = 0; i < files.size(); ++i) {
          value.clear();
          crema::encode_datum(
              {.label = static_cast<std::int32_t>(i % 3), .encoded = true, .data = files[i]},
              value);
          writer.put(fmt::format("{:08}", i), value);
        }
        writer.finish();
      }
      const crema::caffe_transform transform(
          {.crop_size = 100, .mirror = true, .mean_values = {104.0F, 117.0F, 123.0F}});
      crema::caffe_batcher batcher(
          {3, 120, 160}, transform, crema::make_host_batch<float>{},
          crema::image_window_decoder({.channels = 3, .order = crema::channel_order::bgr}));
      // Records of other sizes come out in the batch's shape too: the crop is fixed.
      crema::double_buffered_pipeline pipe{
          crema::lmdb_source(db),
          batcher,
          {.batch_size = 8, .producers = 2, .threads = 2, .seed = 3}};
      const double per_image = mallocs_per_image(pipe, 2, 60);
      MESSAGE("the encoded-Datum pipeline allocates " << per_image << " times per image");
      CHECK(per_image <= libjpeg);
    }
#endif
  }
}
