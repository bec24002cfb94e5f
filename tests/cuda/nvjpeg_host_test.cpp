// The nvJPEG batch decoder's whole flow without a GPU: linked with the fake nvJPEG (libjpeg-turbo
// behind nvjpeg.h's calls) and the counting CUDA runtime, with the kernels' per-value functions
// run on the host. The fake decodes with the CPU path's decoder, so every sample must be the CPU
// path's, byte for byte: on the hardware engine's batch, on the GPU-assisted path, after a batch
// the engine fails, and for the images that go to the CPU path. Also: errors name the image, the
// steady state allocates nothing and makes no stream or event, every nvJPEG object made is
// destroyed, and consumers on two devices get batches decoded on their own.

#include <crema/io/caffe/datum.hpp>
#include <crema/io/image/image_batcher.hpp>
#include <crema/io/image/image_codec.hpp>
#include <crema/io/image/image_folder_source.hpp>
#include <crema/io/image/image_list_source.hpp>
#include <crema/io/nvjpeg/nvjpeg_batch_decoder.hpp>
#include <crema/io/nvjpeg/nvjpeg_batcher.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/host_batch.hpp>
#ifdef CREMA_TEST_LMDB
#include <crema/io/lmdb/lmdb_source.hpp>
#include <crema/io/lmdb/lmdb_writer.hpp>
#endif

#include "common/pipeline_failure.hpp"
#include "common/scratch_directory.hpp"
#include "common/test_data.hpp"
#include "common/watchdog.hpp"
#include "counting_runtime.hpp"
#include "device_consumers.hpp"
#include "fake_nvjpeg.hpp"
#include "host_nvjpeg_decoder.hpp"
#include "nvjpeg_test_data.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using crema::test::batch_input;
using crema::test::batches;
using crema::test::epoch;
using crema::test::image_folder;
using crema::test::photographs;
using crema::test::read_bytes;
using crema::test::test_data;
namespace counting = crema::test::counting_cuda;
namespace fake = crema::test::fake_nvjpeg;

using decoder = crema::test::host_nvjpeg_decoder;

// Each sample against image_transform's (decoded at full size) from the same generator.
template <class T>
void check_samples(const crema::image_transform_options& options, const batch_input& in,
                   const std::vector<T>& out) {
  crema::image_transform_options cpu = options;
  cpu.decode.dct_scaling = false;
  crema::image_transform transform(cpu);
  const std::size_t sample = transform.shape().elements();
  REQUIRE(out.size() == in.images.size() * sample);
  std::vector<T> expected(sample);
  for (std::size_t i = 0; i < in.images.size(); ++i) {
    transform(in.files[i], std::span(expected), in.images[i].rng, in.keys[i]);
    CAPTURE(in.keys[i]);
    CHECK(std::memcmp(expected.data(), out.data() + i * sample, sample * sizeof(T)) == 0);
  }
}

template <class T>
std::vector<T> decode(decoder& gpu, const batch_input& in) {
  std::vector<T> out(in.images.size() * gpu.shape().elements());
  gpu.decode<T>(in.images, out.data(), nullptr);
  return out;
}

// One epoch of `root` through the CPU pipeline with `options` decoded at full size (as the GPU
// decoder does): the batches a GPU-decoded epoch must equal.
batches cpu_epoch(const std::filesystem::path& root, crema::image_transform_options options) {
  options.decode.dct_scaling = false;
  const std::size_t sample = crema::image_transform(options).shape().elements();
  return epoch(
      root, crema::image_batcher(crema::image_transform(options), crema::make_host_batch<float>{}),
      1, crema::test::read_host_batch(sample));
}

// Reads a GPU-decoded batch for `epoch` once `compute` waits for it (the counting runtime's
// device memory reads as host memory), then gives it back after `compute`'s work.
auto read_device_batch(crema::cuda_stream& compute) {
  return [&compute](auto& batch) {
    const auto on_device = batch->device(compute);
    std::pair result(
        std::vector<float>(on_device.data.data(), on_device.data.data() + on_device.data.size()),
        std::vector<float>(on_device.labels.data(),
                           on_device.labels.data() + on_device.labels.size()));
    batch.release_after(compute.record());
    return result;
  };
}

// A decoder whose construction fails while flaky_decoder_failures is above 0, as nvJPEG's start
// fails without its library.
std::atomic<int> flaky_decoder_failures{0};
struct flaky_decoder {
  flaky_decoder(const crema::image_transform_options& /*options*/,
                const crema::cuda::nvjpeg_options& /*decoding*/) {
    if (flaky_decoder_failures.fetch_sub(1) > 0) {
      throw crema::cuda_error(cudaErrorInitializationError, "no nvJPEG here");
    }
  }
};

// The cause of the error that stops a single pass of `pipe`, whose consumer waits for each batch.
template <class Pipeline>
std::string cause_of_failed_pass(Pipeline& pipe) {
  return crema::test::failure_cause([&] {
    for (auto batch : pipe.consumer(0)) (void)batch->device();
  });
}

// One epoch of the folder at `root` through `batcher` on one producer, read after a stream waits
// for each batch, while the test holds the only decoder until `happened()`, as
// crema::test::epoch_while_held says.
template <class Batcher, class Condition>
std::pair<batches, bool> epoch_while_held(const std::filesystem::path& root, const Batcher& batcher,
                                          Condition happened) {
  crema::cuda_stream compute;
  return crema::test::epoch_while_held(root, batcher, 0, 1, read_device_batch(compute),
                                       std::move(happened));
}

std::vector<crema::image_transform_options> every_kind() {
  return {
      {.geometry = crema::random_resized_crop{.height = 64, .width = 56},
       .mirror = true,
       .mean = {0.485F, 0.456F, 0.406F},
       .std = {0.229F, 0.224F, 0.225F}},
      {.geometry = crema::resize_center_crop{.resize = 80, .crop_height = 64, .crop_width = 64},
       .mirror = true,
       .layout = crema::pixel_layout::hwc},
      {.geometry = crema::random_resized_crop{.height = 48, .width = 48},
       .decode = {.channels = 1}},
  };
}

#ifdef CREMA_TEST_LMDB
// `in`'s images as encoded Datums, as Caffe's convert_imageset --encoded stores them: record i
// under "%08d_" and its key, labelled i.
void put_encoded_datums(crema::lmdb_writer& writer, const batch_input& in) {
  std::vector<std::byte> value;
  for (std::size_t i = 0; i < in.files.size(); ++i) {
    value.clear();
    crema::encode_datum(
        {.label = static_cast<std::int32_t>(i), .encoded = true, .data = in.files[i]}, value);
    writer.put(fmt::format("{:08}_{}", i, in.keys[i]), value);
  }
}
#endif

}  // namespace

TEST_SUITE("nvjpeg batch decoder on the host") {
  TEST_CASE("on the hardware engine, every sample is the CPU path's, the PNG through the CPU") {
    for (const auto& options : every_kind()) {
      decoder gpu(options);
      CHECK(gpu.hardware());
      const batch_input in = photographs(3);
      const auto before = fake::counts();
      check_samples(options, in, decode<float>(gpu, in));
      check_samples(options, in, decode<float>(gpu, in));  // the buffers reused
      CHECK(gpu.last_batch().hardware == 6);
      CHECK(gpu.last_batch().hybrid == 0);
      CHECK(gpu.last_batch().host == 1);
      CHECK(fake::counts().batched - before.batched == 12);
      // nvJPEG's batched state is set up once for a batch size, not for every batch.
      CHECK(fake::counts().initialized - before.initialized == 1);
      const batch_input fewer = photographs(2);
      check_samples(options, fewer, decode<float>(gpu, fewer));
      check_samples(options, in, decode<float>(gpu, in));
      CHECK(fake::counts().initialized - before.initialized == 3);
      // The engine's buffers pooled before its first batch, again only for a larger one.
      CHECK(fake::counts().pooled - before.pooled == 1);
      const batch_input more = photographs(4);
      check_samples(options, more, decode<float>(gpu, more));
      CHECK(fake::counts().pooled - before.pooled == 2);
    }
  }

  TEST_CASE(
      "where nvJPEG refuses to pool the engine's buffers, batches decode without, once asked") {
    const fake::scoped_behaviour fake_gpu({.pool_refused = true});
    const auto options = every_kind().front();
    decoder gpu(options);
    const auto before = fake::counts();
    for (const std::size_t copies : {2, 3, 4}) {
      const batch_input in = photographs(copies);
      check_samples(options, in, decode<float>(gpu, in));
      CHECK(gpu.last_batch().hardware == 2 * copies);
    }
    CHECK(fake::counts().pool_refusals - before.pool_refusals == 1);
    CHECK(fake::counts().pooled == before.pooled);
  }

  TEST_CASE("without a hardware engine, the GPU-assisted decoder gives the same samples") {
    for (const bool engine : {false, true}) {
      const fake::scoped_behaviour fake_gpu(
          {.hardware_engine = engine, .engine_takes_images = false});
      for (const auto& options : every_kind()) {
        decoder gpu(options);
        const batch_input in = photographs(2);
        const auto before = fake::counts();
        check_samples(options, in, decode<std::uint8_t>(gpu, in));
        CHECK(gpu.last_batch().hardware == 0);
        CHECK(gpu.last_batch().hybrid == 0);  // none in the turn: decoded ahead by the plan
        CHECK(gpu.last_batch().ahead == 4);
        CHECK(gpu.last_batch().host == 1);
        // The photographs (256 x 256, 253 x 171) are under a million pixels: Huffman decoding
        // on the host.
        CHECK(fake::counts().host_huffman - before.host_huffman == 4);
        CHECK(fake::counts().gpu_huffman - before.gpu_huffman == 0);
        check_samples(options, in, decode<std::uint8_t>(gpu, in));  // the buffers reused
      }
    }
  }

  TEST_CASE("images above gpu_huffman_above_pixels have their Huffman decoding on the GPU") {
    const fake::scoped_behaviour fake_gpu({.hardware_engine = false});
    const auto options = every_kind().front();
    batch_input in = photographs(2);
    in.add(crema::test::progressive_coffee(), "coffee-progressive.jpg", 11);
    // A window needs the Huffman decoding of its image's rows down to its own last one: of
    // astronaut.jpg's 65,536 pixels, 256 a row. Those past the line, of the 4 baseline JPEGs:
    const std::size_t line = 63'000;
    std::size_t past = 0;
    std::size_t whole_past = 0;  // what counting whole images would say
    crema::image_decoder header;
    crema::image_transform_options full = options;
    full.decode.dct_scaling = false;
    const crema::image_transform transform(full);
    for (std::size_t i = 0; i < 4; ++i) {
      const crema::image_info info = header.info(in.images[i].bytes, in.keys[i]);
      crema::sample_rng rng = in.images[i].rng;
      const crema::pixel_window w = transform.geometry(info.height, info.width, rng).window;
      past += info.width * (w.top + w.height) > line ? 1 : 0;
      whole_past += info.width * info.height > line ? 1 : 0;
    }
    REQUIRE(past != whole_past);  // the windows of these draws tell the two apart
    decoder gpu(options, {.gpu_huffman_above_pixels = line});
    auto before = fake::counts();
    check_samples(options, in, decode<float>(gpu, in));
    CHECK(fake::counts().gpu_huffman - before.gpu_huffman == past);
    CHECK(fake::counts().host_huffman - before.host_huffman == 5 - past);
    CHECK(gpu.last_batch().ahead == 5);
    // All above: the progressive one still on the host, which the GPU's Huffman decoding does
    // not take; so in the decoder's call, for a plan whose maker did not decode ahead.
    decoder all_gpu(options, {.gpu_huffman_above_pixels = 0});
    before = fake::counts();
    check_samples(options, in, decode<float>(all_gpu, in));
    CHECK(fake::counts().gpu_huffman - before.gpu_huffman == 4);
    CHECK(fake::counts().host_huffman - before.host_huffman == 1);
    crema::cuda::nvjpeg_batch_plan plan(all_gpu.library(), options);
    plan.make(in.images);
    std::vector<float> out(in.images.size() * all_gpu.shape().elements());
    before = fake::counts();
    all_gpu.decode(plan, std::span<const crema::cuda::encoded_image>(in.images), out.data(),
                   nullptr);
    check_samples(options, in, out);
    CHECK(all_gpu.last_batch().hybrid == 5);
    CHECK(fake::counts().gpu_huffman - before.gpu_huffman == 4);
    CHECK(fake::counts().host_huffman - before.host_huffman == 1);
  }

  TEST_CASE("a hardware share leaves the engine's last images to the GPU-assisted decoder") {
    const auto options = every_kind().front();
    const batch_input in = photographs(3);  // 6 JPEGs and a PNG
    // The share, and the JPEGs the engine keeps of the 6.
    for (const auto& setting : {std::pair<double, std::size_t>{1.0, 6},
                                {0.5, 3},
                                {0.65, 4},
                                std::pair<double, std::size_t>{0.0, 0}}) {
      CAPTURE(setting.first);
      decoder gpu(options, {.hardware_share = setting.first});
      check_samples(options, in, decode<float>(gpu, in));
      CHECK(gpu.last_batch().hardware == setting.second);
      CHECK(gpu.last_batch().ahead == 6 - setting.second);
      CHECK(gpu.last_batch().host == 1);
    }
    for (const double share : {-0.5, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
      CAPTURE(share);
      CHECK_THROWS_WITH_AS(decoder(options, {.hardware_share = share}),
                           doctest::Contains("hardware_share"), crema::config_error);
      // The batcher says so when it is made.
      CHECK_THROWS_WITH_AS((crema::cuda::basic_nvjpeg_batcher<float, decoder>(
                               options, {.decoding = {.hardware_share = share}})),
                           doctest::Contains("hardware_share"), crema::config_error);
    }
  }

  TEST_CASE("a batch the engine fails is decoded image by image, with the same samples") {
    const fake::scoped_behaviour fake_gpu({.batch_fails = true});
    const auto options = every_kind().front();
    decoder gpu(options);
    const batch_input in = photographs(2);
    const auto before = fake::counts();
    check_samples(options, in, decode<float>(gpu, in));
    CHECK(gpu.last_batch().hybrid == 4);
    // The failed batch's state is set up again for the next (the fake refuses it otherwise).
    check_samples(options, in, decode<float>(gpu, in));
    CHECK(gpu.last_batch().hybrid == 4);
    CHECK(fake::counts().initialized - before.initialized == 2);
  }

  TEST_CASE("a corrupt JPEG is a format_error naming it, and the next batch decodes") {
    for (const bool engine : {true, false}) {
      const fake::scoped_behaviour fake_gpu({.hardware_engine = engine});
      const auto options = every_kind().front();
      decoder gpu(options);
      batch_input in = photographs(2);
      in.files[2].resize(in.files[2].size() / 2);  // astronaut-1.jpg, cut short
      in.rebuild(11);
      const auto before = counting::all_threads();
      CHECK_THROWS_WITH_AS(decode<float>(gpu, in), doctest::Contains("astronaut-1.jpg"),
                           crema::format_error);
      // What was queued before the error is waited for by the next batch: an event after it
      // (without the engine, after one for each of the three JPEGs decoded ahead and one for
      // their hand-over).
      CHECK((counting::all_threads() - before)[counting::call::event_record] == (engine ? 1 : 5));
      batch_input good = photographs(2);
      check_samples(options, good, decode<float>(gpu, good));
    }
  }

  TEST_CASE("a JPEG the GPU-assisted decoder fails is a format_error naming it, from the plan") {
    const fake::scoped_behaviour fake_gpu({.hardware_engine = false, .hybrid_fails = true});
    const auto options = every_kind().front();
    decoder gpu(options);
    const batch_input in = photographs(1);
    crema::cuda::nvjpeg_batch_plan plan(gpu.library(), options);
    plan.make(in.images);
    CHECK_THROWS_WITH_AS(plan.decode_hybrid(in.images), doctest::Contains("astronaut-0.jpg"),
                         crema::format_error);
    CHECK(plan.size() == 0);  // not all decoded: nothing planned
    std::vector<float> out(in.images.size() * gpu.shape().elements());
    CHECK_THROWS_AS(gpu.decode(plan, std::span<const crema::cuda::encoded_image>(in.images),
                               out.data(), nullptr),
                    crema::config_error);
    fake::set({.hardware_engine = false});
    check_samples(options, in, decode<float>(gpu, in));
    plan.make(in.images);
    plan.decode_hybrid(in.images);
    CHECK(plan.size() == in.images.size());
  }

  TEST_CASE(
      "a JPEG that never reaches its end goes to the CPU path, and bytes after the end do not") {
    const auto bytes = [](std::initializer_list<unsigned> values) {
      std::vector<std::byte> out;
      for (const unsigned v : values) out.push_back(static_cast<std::byte>(v));
      return out;
    };
    const std::vector<std::byte> photo = read_bytes(test_data("astronaut.jpg"));
    const auto cut = [](std::vector<std::byte> b, std::size_t size) {
      b.resize(size);
      return b;
    };
    std::vector<std::byte> trailing = photo;
    trailing.insert(trailing.end(), 64, std::byte{0});
    // An APP1 segment holding FF D9 (as an EXIF thumbnail's end) before the first scan.
    std::vector<std::byte> thumbnail =
        bytes({0xFF, 0xD8, 0xFF, 0xE1, 0x00, 0x06, 0xFF, 0xD9, 0, 0});
    thumbnail.insert(thumbnail.end(), photo.begin() + 2, photo.end());
    using crema::detail::jpeg_reaches_end;
    CHECK(jpeg_reaches_end(photo));
    CHECK(jpeg_reaches_end(trailing));
    CHECK(jpeg_reaches_end(thumbnail));
    CHECK_FALSE(jpeg_reaches_end(cut(photo, photo.size() / 2)));
    CHECK_FALSE(jpeg_reaches_end(cut(photo, photo.size() - 1)));
    CHECK_FALSE(jpeg_reaches_end(cut(thumbnail, thumbnail.size() / 2)));
    CHECK_FALSE(jpeg_reaches_end(bytes({0xFF, 0xD8, 0xFF, 0xD9})));
    CHECK_FALSE(jpeg_reaches_end(bytes({0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x40, 0xFF, 0xD9})));
    CHECK_FALSE(jpeg_reaches_end(bytes({0x89, 'P', 'N', 'G', 0xFF, 0xD9})));
    CHECK_FALSE(jpeg_reaches_end({}));

    // Decoded: the one cut short by the CPU path, which (asked to) accepts libjpeg's warning.
    auto options = every_kind().front();
    options.decode.accept_warnings = true;
    batch_input in = photographs(1);  // astronaut-0.jpg, coffee-0.jpg, coffee.png
    in.files[0] = trailing;
    in.files[1].resize(in.files[1].size() - 2);  // coffee-0.jpg without its end marker
    in.rebuild(11);
    decoder gpu(options);
    const auto out = decode<float>(gpu, in);
    CHECK(gpu.last_batch().hardware == 1);
    CHECK(gpu.last_batch().host == 2);
    check_samples(options, in, out);
  }

  TEST_CASE("bytes that are no image are a format_error naming them, before anything is queued") {
    decoder gpu(every_kind().front());
    batch_input in = photographs(1);
    in.add(std::vector<std::byte>(100, std::byte{7}), "notes.txt", 11);
    const auto before = counting::all_threads();
    CHECK_THROWS_WITH_AS(decode<float>(gpu, in), doctest::Contains("notes.txt"),
                         crema::format_error);
    CHECK((counting::all_threads() - before)[counting::call::memcpy_async] == 0);
  }

  TEST_CASE("a batch costs one copy of its jobs, one per CPU-path sample and one event record") {
    decoder gpu(every_kind().front());
    const batch_input in = photographs(3);
    (void)decode<float>(gpu, in);  // the buffers grow
    const auto before = counting::all_threads();
    (void)decode<float>(gpu, in);
    const auto calls = counting::all_threads() - before;
    CHECK(calls[counting::call::allocate] == 0);
    CHECK(calls[counting::call::free] == 0);
    CHECK(calls[counting::call::event_create] == 0);
    CHECK(calls[counting::call::stream_create] == 0);
    CHECK(calls[counting::call::memcpy_async] == 2);  // the jobs, the PNG's sample
    CHECK(calls[counting::call::event_record] == 1);
    CHECK(calls[counting::call::event_synchronize] == 1);  // the previous batch's
  }

  TEST_CASE("the decoder waits for its last batch asleep, not spinning on a core") {
    decoder gpu(every_kind().front());
    const batch_input in = photographs(2);
    const auto before = counting::this_thread();
    const std::uint64_t spinning = counting::spinning_waits();
    for (int batch = 0; batch < 3; ++batch) (void)decode<float>(gpu, in);
    // Each batch after the first waits for the one before (its buffers are reused).
    CHECK((counting::this_thread() - before)[counting::call::event_synchronize] == 2);
    CHECK(counting::spinning_waits() == spinning);
  }

  TEST_CASE("a decoder destroyed after a fault does not wait for its last batch") {
    const batch_input in = photographs(2);
    // The calls destroying a decoder whose last batch is queued makes, with the runtime failing
    // every call from the first query on (as after a kernel's fault) or not.
    const auto destroyed = [&](bool faulted) {
      std::optional<decoder> gpu(std::in_place, every_kind().front());
      (void)decode<float>(*gpu, in);
      const auto before = counting::all_threads();
      if (faulted)
        counting::fail_call(counting::call::event_query, 0, cudaErrorIllegalAddress, true);
      gpu.reset();
      counting::heal();
      return counting::all_threads() - before;
    };
    // Its work may still read the buffers it frees: it asks whether that work is done (the
    // counting runtime's always is) and waits where it is not.
    const auto calm = destroyed(false);
    CHECK(calm[counting::call::event_query] + calm[counting::call::event_synchronize] >= 1);
    // After a fault, the query fails and nothing is waited for.
    const auto faulted = destroyed(true);
    CHECK(faulted[counting::call::event_query] >= 1);
    CHECK(faulted[counting::call::event_synchronize] == 0);
  }

  TEST_CASE("a plan made apart, with another nvJPEG, decodes as the decoder's own plan") {
    const fake::scoped_behaviour fake_gpu;  // a subcase makes a decoder without the engine
    const auto options = every_kind().front();
    using images_span = std::span<const crema::cuda::encoded_image>;
    decoder gpu(options);
    const batch_input in = photographs(2);  // 4 JPEGs and a PNG
    const std::size_t sample = gpu.shape().elements();
    // As a producer plans: with the device's planning nvJPEG, not the decoder's.
    crema::cuda::nvjpeg_batch_plan plan(std::make_shared<const crema::cuda::nvjpeg_library>(),
                                        options);
    plan.make(in.images);
    std::vector<float> out(in.images.size() * sample);
    gpu.decode(plan, images_span(in.images), out.data(), nullptr);
    check_samples(options, in, out);
    CHECK(gpu.last_batch().hardware == 4);
    CHECK(gpu.last_batch().host == 1);
    CHECK(gpu.last_batch().queued.count() > 0);

    SUBCASE("images left to be decoded elsewhere (a producer's CPU share) are not written") {
      REQUIRE(std::vector(plan.in_turn().begin(), plan.in_turn().end()) ==
              std::vector<std::size_t>{0, 1, 2, 3});
      const std::vector<std::size_t> left{1, 3};
      plan.leave(left);
      CHECK(std::vector(plan.in_turn().begin(), plan.in_turn().end()) ==
            std::vector<std::size_t>{0, 2});
      const float untouched = -1000.0F;
      std::vector<float> rest(out.size(), untouched);
      gpu.decode(plan, images_span(in.images), rest.data(), nullptr);
      CHECK(gpu.last_batch().hardware == 2);
      CHECK(gpu.last_batch().host == 1);
      for (std::size_t i = 0; i < in.images.size(); ++i) {
        CAPTURE(i);
        const bool was_left = i == 1 || i == 3;
        const std::span<const float> got(rest.data() + i * sample, sample);
        if (was_left) {
          CHECK(std::all_of(got.begin(), got.end(), [&](float v) { return v == untouched; }));
        } else {
          CHECK(std::memcmp(got.data(), out.data() + i * sample, sample * sizeof(float)) == 0);
        }
      }
      // Only what a decoder decodes in its turn can be left: not the PNG, nor one left already.
      CHECK_THROWS_WITH_AS(plan.leave(std::vector<std::size_t>{4}),
                           doctest::Contains("image 4 of 5 is not one a decoder decodes"),
                           crema::config_error);
      CHECK_THROWS_WITH_AS(plan.leave(left), doctest::Contains("image 1 of 5"),
                           crema::config_error);
    }
    SUBCASE("what nvJPEG does not take decoded with the plan, uploaded as it is in the turn") {
      REQUIRE(plan.on_host().size() == 1);
      CHECK(plan.on_host()[0] == 4);  // coffee.png
      std::vector<float> png(sample);
      plan.decode_on_host(images_span(in.images), std::span(png));
      CHECK(std::memcmp(png.data(), out.data() + 4 * sample, sample * sizeof(float)) == 0);
      // The decoder reads the PNG no more: bytes that are no image would fail it there.
      batch_input without = in;
      without.files[4] = std::vector<std::byte>(100, std::byte{7});
      without.rebuild(11);
      std::vector<float> again(out.size());
      gpu.decode(plan, images_span(without.images), again.data(), nullptr);
      CHECK(again == out);
      CHECK(gpu.last_batch().host == 1);
      // The samples are of the batch's type, and there is room for each.
      CHECK_THROWS_WITH_AS(gpu.decode(plan, images_span(in.images),
                                      std::vector<std::uint8_t>(out.size()).data(), nullptr),
                           doctest::Contains("CPU-path samples of"), crema::config_error);
      std::vector<float> none;
      CHECK_THROWS_WITH_AS(plan.decode_on_host(images_span(in.images), std::span(none)),
                           doctest::Contains("of which 1 on the host"), crema::config_error);
      // A plan made again decodes its CPU-path images in the turn unless told otherwise.
      plan.make(in.images);
      gpu.decode(plan, images_span(in.images), again.data(), nullptr);
      CHECK(again == out);
    }
    SUBCASE("the JPEGs the engine refuses decoded ahead by the plan's maker, copied in the turn") {
      batch_input mixed = in;
      mixed.add(crema::test::progressive_coffee(), "coffee-progressive.jpg", 11);
      std::vector<float> by_decoder(mixed.images.size() * sample);
      gpu.decode(images_span(mixed.images), by_decoder.data(), nullptr);
      CHECK(gpu.last_batch().ahead == 1);  // the decoder's own plan decodes ahead too
      CHECK(gpu.last_batch().hybrid == 0);
      check_samples(options, mixed, by_decoder);
      plan.make(mixed.images);
      plan.decode_hybrid(images_span(mixed.images));
      CHECK(std::vector(plan.ahead().begin(), plan.ahead().end()) == std::vector<std::size_t>{5});
      const auto nvjpeg_before = fake::counts();
      const auto before = counting::all_threads();
      std::vector<float> by_plan(by_decoder.size());
      gpu.decode(plan, images_span(mixed.images), by_plan.data(), nullptr);
      CHECK(by_plan == by_decoder);
      CHECK(gpu.last_batch().ahead == 1);
      // In the turn, none of the GPU-assisted decoder's phases: the stream waits for the plan's
      // work and copies the window (with the jobs and the PNG's sample: 3 copies), and records
      // the copy's event and the batch's.
      CHECK(fake::counts().hybrid == nvjpeg_before.hybrid);
      CHECK(fake::counts().host_huffman == nvjpeg_before.host_huffman);
      const auto calls = counting::all_threads() - before;
      CHECK(calls[counting::call::stream_wait_event] == 1);
      CHECK(calls[counting::call::memcpy_async] == 3);
      CHECK(calls[counting::call::event_record] == 2);
    }
    SUBCASE("leave after decode_hybrid keeps the windows decoded ahead where they were") {
      // Progressive JPEGs (decoded ahead) first, between and after the engine's.
      const std::vector<std::byte> progressive = crema::test::progressive_coffee();
      batch_input mixed;
      for (int i = 0; i < 3; ++i) {
        mixed.add(progressive, fmt::format("progressive-{}.jpg", i), 11);
        mixed.add(in.files[static_cast<std::size_t>(i)], in.keys[static_cast<std::size_t>(i)], 11);
      }
      std::vector<float> whole(mixed.images.size() * sample);
      gpu.decode(images_span(mixed.images), whole.data(), nullptr);
      plan.make(mixed.images);
      plan.decode_hybrid(images_span(mixed.images));
      REQUIRE(plan.ahead().size() == 3);
      // The engine's first image, between windows decoded ahead, left.
      REQUIRE(plan.in_turn().size() == 3);
      REQUIRE(plan.in_turn()[0] == 1);
      plan.leave(std::vector<std::size_t>{1});
      CHECK(plan.ahead().size() == 3);
      std::vector<float> rest(whole.size(), 0.0F);
      gpu.decode(plan, images_span(mixed.images), rest.data(), nullptr);
      CHECK(std::memcmp(rest.data(), whole.data(), sample * sizeof(float)) == 0);
      CHECK(std::memcmp(rest.data() + 2 * sample, whole.data() + 2 * sample,
                        (whole.size() - 2 * sample) * sizeof(float)) == 0);
      CHECK(gpu.last_batch().ahead == 3);
      CHECK(gpu.last_batch().hardware == 2);
    }
    SUBCASE("planned where the engine started, decoded where it did not: GPU-assisted") {
      fake::set({.hardware_engine = false});
      decoder no_engine(options);
      fake::set({});
      std::vector<float> again(out.size());
      no_engine.decode(plan, images_span(in.images), again.data(), nullptr);
      CHECK(again == out);
      CHECK(no_engine.last_batch().hardware == 0);
      CHECK(no_engine.last_batch().hybrid == 4);
    }
    SUBCASE("a plan of another batch size or sample shape is refused") {
      const std::string size_error =
          fmt::format("a plan of 5 images of {} elements for a batch of 2", sample);
      CHECK_THROWS_WITH_AS(gpu.decode(plan, images_span(in.images).first(2), out.data(), nullptr),
                           doctest::Contains(size_error.c_str()), crema::config_error);
      crema::cuda::nvjpeg_batch_plan other(gpu.library(), every_kind()[1]);
      other.make(in.images);
      CHECK_THROWS_WITH_AS(gpu.decode(other, images_span(in.images), out.data(), nullptr),
                           doctest::Contains("nvjpeg_batch_decoder: a plan of 5 images"),
                           crema::config_error);
    }
  }

  TEST_CASE("every nvJPEG object the decoder and a plan make is destroyed with them") {
    const fake::scoped_behaviour fake_gpu({.hardware_engine = true, .engine_takes_images = false});
    const std::size_t before = fake::live_objects();
    {
      decoder gpu(every_kind().front());
      const batch_input in = photographs(2);
      (void)decode<float>(gpu, in);
      crema::cuda::nvjpeg_batch_plan plan(gpu.library(), every_kind().front());
      plan.make(in.images);
      plan.decode_hybrid(in.images);
      CHECK(plan.ahead().size() == 4);
      CHECK(fake::live_objects() > before);
    }
    CHECK(fake::live_objects() == before);
  }

  TEST_CASE("after a fault for good, the nvJPEG objects on the device are left undestroyed") {
    // After a kernel's fault every call fails until the process ends; on an H100 a feed's
    // teardown then hung. A decoder, its nvJPEG and a plan decoding ahead, destroyed with the
    // runtime failing from their first query on (`sticky`), with that query alone failing, or
    // with none failing: the objects on the device they leave, and the waits they make.
    const fake::scoped_behaviour fake_gpu({.hardware_engine = true, .engine_takes_images = false});
    const std::size_t before = fake::live_device_objects();
    struct ended {
      std::size_t made = 0;  // objects on the device, alive before the destruction
      std::size_t left = 0;  // and after it
      std::uint64_t waits = 0;
    };
    const auto destroyed = [&](bool fail, bool sticky) {
      std::optional<decoder> gpu(std::in_place, every_kind().front());
      const batch_input in = photographs(2);
      (void)decode<float>(*gpu, in);  // on the GPU-assisted decoder: its states and buffers
      std::optional<crema::cuda::nvjpeg_batch_plan> plan(std::in_place, gpu->library(),
                                                         every_kind().front());
      plan->make(in.images);
      plan->decode_hybrid(in.images);
      REQUIRE(plan->ahead().size() == 4);
      const std::size_t made = fake::live_device_objects() - before;
      const auto calls = counting::all_threads();
      if (fail)
        counting::fail_call(counting::call::event_query, 0, cudaErrorIllegalAddress, sticky);
      plan.reset();
      gpu.reset();
      counting::heal();
      return ended{.made = made,
                   .left = fake::live_device_objects() - before,
                   .waits = (counting::all_threads() - calls)[counting::call::event_synchronize]};
    };
    const ended calm = destroyed(false, false);
    CHECK(calm.left == 0);
    const ended once = destroyed(true, false);  // a failure of one call alone is no fault
    CHECK(once.left == 0);
    const ended faulted = destroyed(true, true);
    // The handle, its 2 decoders, the engine's state, and the GPU-assisted decoder's states and
    // buffers, the decoder's and the plan's: none destroyed, and no wait.
    CHECK(faulted.made >= 6);
    CHECK(faulted.left == faulted.made);
    CHECK(faulted.waits == 0);
  }

  TEST_CASE("colour jitter is refused: it is not done on the GPU") {
    crema::image_transform_options options;
    options.jitter.brightness = 0.4F;
    CHECK_THROWS_WITH_AS(decoder{options}, doctest::Contains("colour jitter"), crema::config_error);
    // The batcher says so when it is made, not when its first batch is decoded.
    CHECK_THROWS_WITH_AS((crema::cuda::basic_nvjpeg_batcher<float, decoder>(options)),
                         doctest::Contains("colour jitter"), crema::config_error);
  }

  TEST_CASE("a folder pipeline of GPU-decoded batches delivers the CPU pipeline's batches") {
    const image_folder folder("nvjpeg-folder");
    const crema::image_transform_options options = every_kind().front();
    const batches expected = cpu_epoch(folder.path(), options);
    REQUIRE(expected.size() == 4);  // 16 images in batches of 4
    for (const std::size_t producers : {1, 3}) {
      CAPTURE(producers);
      crema::cuda_stream compute;  // the consumer's
      std::uint64_t consumer_waits = 0;
      const batches got = epoch(
          folder.path(), crema::cuda::basic_nvjpeg_batcher<float, decoder>(options), producers,
          [&](auto& batch) {
            const auto before = counting::this_thread();
            auto result = read_device_batch(compute)(batch);
            consumer_waits += (counting::this_thread() - before)[counting::call::stream_wait_event];
            return result;
          });
      CHECK(got == expected);
      CHECK(consumer_waits == expected.size());
    }
    // The engine read every image from pinned memory (the batches keep the bytes there); from
    // a vector's, the images are pageable.
    const auto pageable = fake::counts().pageable_inputs;
    crema::cuda_stream compute;
    (void)epoch(folder.path(), crema::cuda::basic_nvjpeg_batcher<float, decoder>(options), 2,
                read_device_batch(compute));
    CHECK(fake::counts().batched > 0);
    CHECK(fake::counts().pageable_inputs == pageable);
    decoder gpu(options);
    (void)decode<float>(gpu, photographs(1));
    CHECK(fake::counts().pageable_inputs - pageable == 2);
  }

  TEST_CASE(
      "an nvjpeg_batcher feeds consumers on two devices, each batch decoded on its consumer's "
      "device, and no call mixes devices") {
    const crema::test::watchdog guard(std::chrono::seconds(60), "nvjpeg_batcher on two devices");
    const image_folder folder("nvjpeg-two-devices");
    const crema::image_transform_options options = every_kind().front();
    const batches expected = cpu_epoch(folder.path(), options);
    REQUIRE(expected.size() == 4);  // dealt in turn: 0 and 2 to consumer 0, 1 and 3 to 1
    const counting::devices_for_scope two_devices(2);
    const std::uint64_t refused = counting::calls_across_devices();
    // What each consumer got, on a thread of its own with its device current, as a training
    // engine runs a solver a device.
    struct consumed {
      batches got;
      int misplaced = 0;  // batches not in the consumer's device memory
    };
    std::array<consumed, 2> by{};
    std::vector<std::string> errors;
    crema::cuda::basic_nvjpeg_batcher<float, decoder> batcher(options, {.devices = {0, 1}});
    {
      crema::image_folder_source source(folder.path());
      source.shuffle(5);
      crema::double_buffered_pipeline pipe{std::move(source),
                                           batcher,
                                           {.batch_size = 4,
                                            .producers = 3,
                                            .threads = 2,
                                            .consumers = 2,
                                            .mode = crema::pipeline_mode::single_pass,
                                            .ordered = true,
                                            .seed = 99}};
      errors = crema::test::consume_on_devices(pipe, 2, [&](int device, auto range) {
        consumed& mine = by[static_cast<std::size_t>(device)];
        crema::cuda_stream compute;  // on the consumer's device
        for (auto batch : range) {
          if (!crema::test::in_memory_of(device, batch->device(compute).data.data())) {
            ++mine.misplaced;
          }
          mine.got.push_back(read_device_batch(compute)(batch));
        }
      });
    }
    CHECK_MESSAGE(errors[0].empty(), errors[0]);
    CHECK_MESSAGE(errors[1].empty(), errors[1]);
    CHECK(by[0].misplaced == 0);
    CHECK(by[1].misplaced == 0);
    CHECK(by[0].got == batches{expected[0], expected[2]});
    CHECK(by[1].got == batches{expected[1], expected[3]});
    CHECK(batcher.decoders_made(0) >= 1);  // each device's batches, its own decoders
    CHECK(batcher.decoders_made(1) >= 1);
    CHECK(counting::calls_across_devices() == refused);
    // Without the devices, every batch is made on the producers' current device, 0: consumer
    // 1 is told so before its kernels would read device 0's memory.
    {
      crema::double_buffered_pipeline pipe{
          crema::image_folder_source(folder.path()),
          crema::cuda::basic_nvjpeg_batcher<float, decoder>(options),
          {.batch_size = 4,
           .producers = 2,
           .threads = 2,
           .consumers = 2,
           .mode = crema::pipeline_mode::single_pass}};
      errors = crema::test::consume_on_devices(pipe, 2, [](int /*device*/, auto range) {
        crema::cuda_stream compute;
        for (auto batch : range) {
          (void)batch->device(compute);
          batch.release_after(compute.record());
        }
      });
    }
    CHECK(errors[1].find("nvjpeg_batcher: a batch of device 0 read by a stream of device 1") == 0);
  }

  TEST_CASE(
      "a fault on one device stops a node's nvjpeg_batcher, and only that device's nvJPEG objects "
      "are left undestroyed") {
    // After a kernel's fault on device 1, every call there fails for good and the other
    // devices' calls go on, as on a node of GPUs. The pass stops with the fault's error, named
    // with device 1, nothing hangs, and the teardown leaves device 1's nvJPEG objects
    // (destroying them may wait on the faulted device) while it destroys device 0's: each
    // device's nvJPEG asks its own device.
    const crema::test::watchdog guard(std::chrono::seconds(60), "nvjpeg_batcher, a device's fault");
    const image_folder folder("nvjpeg-device-fault");
    const counting::devices_for_scope two_devices(2);
    // The first call to fail on device 1, the third of its kind there once both consumers have a
    // batch (so that each device's decoder has decoded, whichever device is the faster): a record
    // (a decoder's, a batch's, its consumer's), a copy (the jobs, a batch's labels), a wait (a
    // refill's for its slot's last decoding), or a consumer stream's wait for its batch.
    for (const counting::call first :
         {counting::call::event_record, counting::call::memcpy_async,
          counting::call::event_synchronize, counting::call::stream_wait_event}) {
      CAPTURE(counting::name_of(first));
      const std::array<std::size_t, 2> before{fake::live_device_objects(0),
                                              fake::live_device_objects(1)};
      std::array<std::size_t, 2> made{};  // each device's objects when its last batch came
      std::vector<std::string> errors;
      std::atomic<int> started{0};  // consumers that have had a batch
      {
        crema::cuda::basic_nvjpeg_batcher<float, decoder> batcher(every_kind().front(),
                                                                  {.devices = {0, 1}});
        crema::double_buffered_pipeline pipe{crema::image_folder_source(folder.path()),
                                             batcher,
                                             {.batch_size = 2,
                                              .producers = 2,
                                              .threads = 2,
                                              .consumers = 2,
                                              .mode = crema::pipeline_mode::repeat}};
        errors = crema::test::consume_on_devices(pipe, 2, [&](int device, auto range) {
          crema::cuda_stream compute;
          bool first_batch = true;
          for (auto batch : range) {
            made[static_cast<std::size_t>(device)] = fake::live_device_objects(device);
            (void)read_device_batch(compute)(batch);
            if (std::exchange(first_batch, false) && started.fetch_add(1) == 1) {
              counting::fail_call(first, 2, cudaErrorIllegalAddress, true, 1);
            }
          }
        });
      }
      const std::uint64_t failed = counting::failed_calls();
      counting::heal();
      CHECK(failed >= 1);
      // Named with its device, whichever call met the fault first (an allocation's error says
      // "cannot allocate ... : cudaErrorIllegalAddress on device 1").
      const std::string& ended = errors[1].empty() ? errors[0] : errors[1];
      CHECK_MESSAGE(ended.find("cudaErrorIllegalAddress") != std::string::npos, ended);
      CHECK_MESSAGE(ended.find("on device 1") != std::string::npos, ended);
      // Device 1's decoder and nvJPEG left as they were; device 0's all destroyed.
      CHECK(made[1] > before[1]);
      CHECK(fake::live_device_objects(1) > before[1]);
      CHECK(made[0] > before[0]);
      CHECK(fake::live_device_objects(0) == before[0]);
    }
  }

  TEST_CASE("an nvjpeg_batcher of 8-bit samples delivers the CPU pipeline's, its labels float") {
    const image_folder folder("nvjpeg-bytes");
    crema::image_transform_options options = every_kind().front();
    options.decode.dct_scaling = false;  // as the GPU decodes: at full size
    const std::size_t sample = crema::image_transform(options).shape().elements();
    const batches expected = epoch(folder.path(),
                                   crema::image_batcher(crema::image_transform(options),
                                                        crema::make_host_batch<std::uint8_t>{}),
                                   1, crema::test::read_host_batch(sample));
    using batcher_type = crema::cuda::basic_nvjpeg_batcher<std::uint8_t, decoder>;
    static_assert(std::is_same_v<batcher_type::batch::label_type, float>);
    crema::cuda_stream compute;
    const batches got = epoch(folder.path(), batcher_type(options), 2, read_device_batch(compute));
    CHECK(got == expected);
  }

  TEST_CASE("an nvjpeg_batcher with int64 labels, as PyTorch takes them, delivers the CPU's") {
    const image_folder folder("nvjpeg-int64-labels");
    const crema::image_transform_options options = every_kind().front();
    const batches expected = cpu_epoch(folder.path(), options);
    using batcher_type = crema::cuda::basic_nvjpeg_batcher<float, decoder, std::int64_t>;
    static_assert(std::is_same_v<batcher_type::batch::label_type, std::int64_t>);
    crema::cuda_stream compute;
    CHECK(epoch(folder.path(), batcher_type(options), 2, read_device_batch(compute)) == expected);
  }

  TEST_CASE("an nvjpeg_batcher with a hardware share delivers the CPU pipeline's batches") {
    const image_folder folder("nvjpeg-hardware-share");
    const crema::image_transform_options options = every_kind().front();
    const batches expected = cpu_epoch(folder.path(), options);  // 4 batches of 4
    const crema::cuda::basic_nvjpeg_batcher<float, decoder> batcher(
        options, {.decoding = {.hardware_share = 0.5}});
    crema::cuda_stream compute;
    CHECK(epoch(folder.path(), batcher, 2, read_device_batch(compute)) == expected);
    // Half of each batch's JPEGs past the engine, the engine keeping 2 of the 3 beside the PNG:
    // 7 of the 15.
    CHECK(batcher.decoded_ahead() == 7);
  }

  TEST_CASE("an nvjpeg_batcher's producers share at most its number of decoders a device") {
    const image_folder folder("nvjpeg-shared-decoders");
    const crema::image_transform_options options = every_kind().front();
    const batches expected = cpu_epoch(folder.path(), options);
    for (const std::size_t limit : {1, 2}) {
      CAPTURE(limit);
      // The copy the pipeline takes shares this one's decoders.
      const crema::cuda::basic_nvjpeg_batcher<float, decoder> batcher(options, {.decoders = limit});
      crema::cuda_stream compute;
      const batches got = epoch(folder.path(), batcher, 4, read_device_batch(compute));
      CHECK(got == expected);
      CHECK(batcher.decoders_made(0) >= 1);
      CHECK(batcher.decoders_made(0) <= limit);
    }
  }

  TEST_CASE("producers decode on the CPU while every decoder is lent, and the batches stay") {
    const image_folder folder("nvjpeg-host-share");
    const crema::image_transform_options options = every_kind().front();
    const batches expected = cpu_epoch(folder.path(), options);  // 4 batches of 4
    using batcher_type = crema::cuda::basic_nvjpeg_batcher<float, decoder>;

    SUBCASE("all of every batch, while the test holds the only decoder") {
      const batcher_type batcher(options, {.decoders = 1, .max_host_share = 1.0});
      const auto held = batcher.decoders().borrow(0);
      crema::cuda_stream compute;
      const batches got = epoch(folder.path(), batcher, 2, read_device_batch(compute));
      CHECK(got == expected);
      // The folder's PNG decoded with the plan, the rest by the share.
      CHECK(batcher.refused() == 1);
      CHECK(batcher.host_decoded() == 15);
      CHECK(batcher.decoders_made(0) == 1);  // the test's: no producer got one
    }
    SUBCASE("at most its share, then the producer waits for the decoder given back") {
      const batcher_type batcher(options, {.decoders = 1, .max_host_share = 0.5});
      // While the test holds the only decoder, the first batch's producer decodes 2 of its 4
      // images, then waits.
      const auto [got, shared_while_held] =
          epoch_while_held(folder.path(), batcher, [&] { return batcher.host_decoded() >= 2; });
      CHECK(shared_while_held);
      CHECK(got == expected);
      CHECK(batcher.host_decoded() >= 2);
      CHECK(batcher.host_decoded() <= 8);  // half of each batch at most
    }
    SUBCASE("never an image the producer decoded ahead: none without an engine") {
      const fake::scoped_behaviour fake_gpu({.hardware_engine = false});
      const batcher_type batcher(options, {.decoders = 1, .max_host_share = 1.0});
      // While the test holds the only decoder, the first batch's producer decodes its JPEGs ahead
      // (3 or 4: the folder holds one PNG), then waits for the decoder to copy their windows.
      const auto [got, decoded_while_held] =
          epoch_while_held(folder.path(), batcher, [&] { return batcher.decoded_ahead() >= 3; });
      CHECK(decoded_while_held);
      CHECK(got == expected);
      CHECK(batcher.decoded_ahead() == 15);
      CHECK(batcher.host_decoded() == 0);
    }
    SUBCASE("with a hardware share, only the engine's images: none decoded twice") {
      const batcher_type batcher(
          options, {.decoders = 1, .max_host_share = 1.0, .decoding = {.hardware_share = 0.5}});
      const auto [got, shared_while_held] =
          epoch_while_held(folder.path(), batcher, [&] { return batcher.host_decoded() >= 1; });
      CHECK(shared_while_held);
      CHECK(got == expected);
      CHECK(batcher.decoded_ahead() == 7);  // as without the share: by place in the batch
      CHECK(batcher.host_decoded() >= 1);
      CHECK(batcher.host_decoded() <= 8);  // the engine's 8
    }
    SUBCASE("none with a share of 0: the producer waits") {
      const batcher_type batcher(options, {.decoders = 1, .max_host_share = 0.0});
      const std::size_t parsed_before = fake::counts().parsed;
      // Held until the first batch's producer has parsed its JPEGs (3 or 4: the folder holds one
      // PNG) and come to borrow the decoder.
      const auto [got, parsed_while_held] = epoch_while_held(
          folder.path(), batcher, [&] { return fake::counts().parsed - parsed_before >= 3; });
      CHECK(parsed_while_held);
      CHECK(got == expected);
      CHECK(batcher.host_decoded() == 0);
      CHECK(batcher.refused() == 1);
    }
  }

  TEST_CASE("a producer parses its batch before it borrows a decoder, not in the decoder's turn") {
    const image_folder folder("nvjpeg-plan-first");
    const crema::image_transform_options options = every_kind().front();
    const batches expected = cpu_epoch(folder.path(), options);  // 4 batches of 4
    using batcher_type = crema::cuda::basic_nvjpeg_batcher<float, decoder>;
    const batcher_type batcher(options, {.decoders = 1});
    const std::size_t parsed_before = fake::counts().parsed;
    // While the test holds the only decoder, the first batch's producer parses its JPEGs (3 or 4:
    // the folder holds one PNG), then waits for the decoder.
    const auto [got, parsed_while_held] = epoch_while_held(
        folder.path(), batcher, [&] { return fake::counts().parsed - parsed_before >= 3; });
    CHECK(parsed_while_held);
    CHECK(got == expected);
    // The producers' times: every batch's planning and queueing, and the first one's wait for
    // the decoder the test held.
    const crema::cuda::nvjpeg_feed_times times = batcher.times();
    CHECK(times.batches == 4);
    CHECK(times.planning.count() > 0);
    CHECK(times.borrowing.count() > 0);
    CHECK(times.queueing.count() > 0);
  }

  TEST_CASE("a producer decodes what nvJPEG does not take before it borrows a decoder") {
    const image_folder folder("nvjpeg-refused-first");
    // Every image of two classes a PNG: the first batch holds some whatever the order.
    const std::vector<std::byte> png = crema::test::coffee_png();
    for (const char* name : {"class0/0.jpg", "class0/2.jpg", "class0/4.jpg", "class1/1.jpg",
                             "class1/3.jpg", "class2/0.jpg", "class2/2.jpg", "class2/4.jpg"}) {
      crema::test::write_bytes(folder.path() / name, png);
    }
    const crema::image_transform_options options = every_kind().front();
    const batches expected = cpu_epoch(folder.path(), options);  // 4 batches of 4
    using batcher_type = crema::cuda::basic_nvjpeg_batcher<float, decoder>;
    const batcher_type batcher(options, {.decoders = 1});
    // While the test holds the only decoder, the first batch's producer decodes its PNGs.
    const auto [got, decoded_while_held] =
        epoch_while_held(folder.path(), batcher, [&] { return batcher.refused() > 0; });
    CHECK(decoded_while_held);
    CHECK(got == expected);
    CHECK(batcher.refused() == 9);  // the eight written and the folder's own
    CHECK(batcher.host_decoded() == 0);
  }

  TEST_CASE("batches of images nvJPEG does not take borrow no decoder, and none is made") {
    const image_folder folder("nvjpeg-no-decoder");
    const std::vector<std::byte> png = crema::test::coffee_png();
    for (const auto& entry : std::filesystem::recursive_directory_iterator(folder.path())) {
      if (entry.path().extension() == ".jpg") crema::test::write_bytes(entry.path(), png);
    }
    const crema::image_transform_options options = every_kind().front();
    const batches expected = cpu_epoch(folder.path(), options);
    const crema::cuda::basic_nvjpeg_batcher<float, decoder> batcher(options);
    crema::cuda_stream compute;
    CHECK(epoch(folder.path(), batcher, 2, read_device_batch(compute)) == expected);
    CHECK(batcher.refused() == 16);
    CHECK(batcher.decoders_made(0) == 0);
  }

  TEST_CASE("a producer does the GPU-assisted decoder's host phase before it borrows a decoder") {
    const fake::scoped_behaviour fake_gpu({.hardware_engine = false});
    const image_folder folder("nvjpeg-ahead-first");
    const crema::image_transform_options options = every_kind().front();
    const batches expected = cpu_epoch(folder.path(), options);  // 4 batches of 4
    using batcher_type = crema::cuda::basic_nvjpeg_batcher<float, decoder>;
    const batcher_type batcher(options, {.decoders = 1});
    const auto before = fake::counts();
    // While the test holds the only decoder, the first batch's producer decodes its JPEGs (3 or 4:
    // the folder holds one PNG) through the GPU-assisted decoder's phases.
    const auto [got, decoded_while_held] = epoch_while_held(folder.path(), batcher, [&] {
      const auto now = fake::counts();
      return now.host_huffman - before.host_huffman >= 3 && now.hybrid - before.hybrid >= 3;
    });
    CHECK(decoded_while_held);
    CHECK(got == expected);
    CHECK(batcher.decoded_ahead() == 15);
    CHECK(batcher.refused() == 1);
  }

  TEST_CASE("an nvjpeg_batcher's producers decode the JPEGs the engine refuses themselves") {
    const image_folder folder("nvjpeg-progressive");
    const std::vector<std::byte> progressive = crema::test::progressive_coffee();
    for (const char* name : {"class0/1.jpg", "class1/2.jpg", "class2/3.jpg", "class2/4.jpg"}) {
      crema::test::write_bytes(folder.path() / name, progressive);
    }
    const crema::image_transform_options options = every_kind().front();
    const batches expected = cpu_epoch(folder.path(), options);
    for (const bool engine : {true, false}) {
      CAPTURE(engine);
      const fake::scoped_behaviour fake_gpu({.hardware_engine = engine});
      const auto hybrid_before = fake::counts().hybrid;
      const crema::cuda::basic_nvjpeg_batcher<float, decoder> batcher(options);
      crema::cuda_stream compute;
      const batches got = epoch(folder.path(), batcher, 2, read_device_batch(compute));
      CHECK(got == expected);
      // The PNG on the CPU path; with the engine, the four progressive ones through the
      // GPU-assisted decoder, by the producers; without, all fifteen JPEGs.
      CHECK(batcher.refused() == 1);
      CHECK(batcher.decoded_ahead() == (engine ? 4 : 15));
      CHECK(fake::counts().hybrid - hybrid_before == (engine ? 4 : 15));
    }
  }

  TEST_CASE("a producer refilling a slot waits for its last decoding asleep, not spinning") {
    const image_folder folder("nvjpeg-refill-wait");
    crema::double_buffered_pipeline pipe{
        crema::image_folder_source(folder.path()),
        crema::cuda::basic_nvjpeg_batcher<float, decoder>(every_kind().front()),
        {.batch_size = 2, .producers = 1, .threads = 1, .mode = crema::pipeline_mode::single_pass}};
    crema::cuda_stream compute;
    const auto before = counting::all_threads();
    const std::uint64_t spinning = counting::spinning_waits();
    std::size_t delivered = 0;
    for (auto batch : pipe.consumer(0)) {
      (void)batch->device(compute);
      batch.release_after(compute.record());
      ++delivered;
    }
    CHECK(delivered == 8);  // 16 images through 4 slots: each slot refilled
    CHECK((counting::all_threads() - before)[counting::call::event_synchronize] >= 4);
    CHECK(counting::spinning_waits() == spinning);
  }

  TEST_CASE("a host share outside 0 to 1 is refused when the batcher is made") {
    using batcher_type = crema::cuda::basic_nvjpeg_batcher<float, decoder>;
    for (const double share : {-0.1, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
      CAPTURE(share);
      CHECK_THROWS_WITH_AS(batcher_type(every_kind().front(), {.max_host_share = share}),
                           doctest::Contains("max_host_share"), crema::config_error);
    }
  }

  TEST_CASE("a decoder pool lends each decoder to one borrower and waits while all are lent") {
    using pool = crema::cuda::basic_nvjpeg_batcher<float, decoder>::decoder_pool;
    pool decoders(every_kind().front(), {}, 2);
    std::optional<pool::loan> first(decoders.borrow(0));
    std::optional<pool::loan> second(decoders.borrow(0));
    CHECK(&**first != &**second);
    CHECK(decoders.made(0) == 2);
    // The limit is a device's: another device's first decoder is made at once.
    { const pool::loan other = decoders.borrow(1); }
    CHECK(decoders.made(1) == 1);

    std::atomic<const decoder*> third{nullptr};
    std::thread borrower([&] {
      const pool::loan loan = decoders.borrow(0);
      third = &*loan;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    CHECK(third.load() == nullptr);  // both lent: it waits
    const decoder* given_back = &**first;
    first.reset();
    borrower.join();
    CHECK(third.load() == given_back);  // the one given back, not a third one made
    CHECK(decoders.made(0) == 2);

    pool unlimited(every_kind().front(), {}, 0);
    std::vector<pool::loan> loans;
    for (int i = 0; i < 5; ++i) loans.push_back(unlimited.borrow(0));
    CHECK(unlimited.made(0) == 5);
  }

  TEST_CASE("a decoder that cannot be made is an error, and the pool stays usable") {
    using pool = crema::cuda::basic_nvjpeg_batcher<float, flaky_decoder>::decoder_pool;
    pool decoders(every_kind().front(), {}, 1);
    flaky_decoder_failures = 1;
    CHECK_THROWS_WITH_AS((void)decoders.borrow(0), doctest::Contains("no nvJPEG"),
                         crema::cuda_error);
    CHECK(decoders.made(0) == 0);
    const pool::loan loan = decoders.borrow(0);  // would wait forever had the failure counted
    CHECK(decoders.made(0) == 1);
  }

  TEST_CASE(
      "a failing runtime stops an nvjpeg_batcher's pipeline, and its decoders are given back") {
    const image_folder folder("nvjpeg-runtime-fault");
    // A pass of 4 producers and one decoder whose call `c` fails after `after` more (and every
    // call after it, if `sticky`, as after a kernel's fault) must end with an error naming the
    // failure, and give the decoder back.
    const auto pass_failing = [&](counting::call c, std::uint64_t after, cudaError_t error,
                                  bool sticky, double host_share) {
      CAPTURE(counting::name_of(c));
      CAPTURE(sticky);
      CAPTURE(host_share);
      const crema::test::watchdog guard(std::chrono::seconds(60), "nvJPEG, a failing runtime");
      const crema::cuda::basic_nvjpeg_batcher<float, decoder> batcher(
          every_kind().front(), {.decoders = 1, .max_host_share = host_share});
      std::string message;
      {
        crema::cuda_stream compute;
        counting::fail_call(c, after, error, sticky);
        try {
          (void)epoch(folder.path(), batcher, 4, read_device_batch(compute));
        } catch (const std::exception& e) {
          message = crema::test::what_with_cause(e);
        }
      }
      counting::heal();
      CHECK(counting::failed_calls() >= 1);
      CHECK_MESSAGE(message.find(cudaGetErrorName(error)) != std::string::npos, message);
      // Where only that call failed, the error names it.
      if (!sticky) CHECK(message.find(counting::name_of(c)) != std::string::npos);
      // The decoder the failing producer held went back to the pool: borrowed at once.
      const auto loan = batcher.decoders().borrow(0);
      CHECK(batcher.decoders().made(0) <= 1);
    };
    for (const double share : {0.0, 1.0}) {
      // A copy in a decoder's turn (the jobs, a CPU-path sample) or of a batch's labels, alone,
      // then with every call after it.
      pass_failing(counting::call::memcpy_async, 2, cudaErrorInvalidValue, false, share);
      pass_failing(counting::call::memcpy_async, 2, cudaErrorIllegalAddress, true, share);
      // The record after a decoder's work, or the consumer's.
      pass_failing(counting::call::event_record, 2, cudaErrorIllegalAddress, true, share);
    }
    // A decoder's wait for its last batch: without a CPU share, the one decoder decodes all four.
    pass_failing(counting::call::event_synchronize, 1, cudaErrorIllegalAddress, true, 0.0);
  }

  TEST_CASE("memory refused to an nvjpeg_batcher is an allocation_error naming the bytes") {
    const image_folder folder("nvjpeg-memory-refused");
    using batcher_type = crema::cuda::basic_nvjpeg_batcher<float, decoder>;
    // One pass of one producer (its batches' memory, the decoder's buffers, the staging of the
    // PNG the CPU path decodes), counted; then one for each of its allocations, refused.
    const crema::cuda::nvjpeg_batcher_options options{.decoders = 1};
    crema::cuda_stream compute;
    const auto before = counting::all_threads();
    (void)epoch(folder.path(), batcher_type(every_kind().front(), options), 1,
                read_device_batch(compute));
    const std::uint64_t allocations = (counting::all_threads() - before)[counting::call::allocate];
    REQUIRE(allocations >= 4);  // a batch's device block and pinned labels, at the least
    for (std::uint64_t k = 0; k < allocations; ++k) {
      CAPTURE(k);
      const crema::test::watchdog guard(std::chrono::seconds(60), "nvJPEG, memory refused");
      const batcher_type batcher(every_kind().front(), options);
      counting::fail_call(counting::call::allocate, k, cudaErrorMemoryAllocation);
      // Refused as the pipeline makes its slots, or by a batch's finishing step.
      std::string cause = "(no allocation_error)";
      try {
        (void)epoch(folder.path(), batcher, 1, read_device_batch(compute));
      } catch (const crema::allocation_error& e) {
        cause = e.what();
      } catch (const crema::pipeline_error&) {
        cause = crema::test::failure_cause<crema::allocation_error>([] { throw; });
      }
      counting::heal();
      CHECK(cause.find("cannot allocate ") == 0);
      CHECK(cause.find(" bytes of ") != std::string::npos);
      CHECK(cause.find("cudaErrorMemoryAllocation") != std::string::npos);
      const auto loan = batcher.decoders().borrow(0);  // given back, whatever failed
    }
  }

#ifdef CREMA_TEST_LMDB
  TEST_CASE(
      "an nvjpeg_batcher over an LMDB of encoded Datums delivers the CPU pipeline's batches") {
    const crema::test::scratch_directory dir("nvjpeg-datums");
    const batch_input in = photographs(3);  // with the PNG, which nvJPEG refuses
    {
      crema::lmdb_writer writer(dir.path());
      put_encoded_datums(writer, in);
      writer.finish();
    }
    const crema::image_transform_options options = every_kind().front();
    crema::image_transform_options cpu = options;
    cpu.decode.dct_scaling = false;  // as the GPU decodes: at full size
    const std::size_t sample = crema::image_transform(cpu).shape().elements();
    const batches expected = crema::test::ordered_pass(
        crema::lmdb_source(dir.path()),
        crema::image_batcher(crema::image_transform(cpu), crema::make_host_batch<float>{}), 1,
        crema::test::read_host_batch(sample));
    REQUIRE(expected.size() == 2);  // 7 records in batches of 4
    const crema::cuda::basic_nvjpeg_batcher<float, decoder> batcher(options);
    crema::cuda_stream compute;
    const batches got = crema::test::ordered_pass(crema::lmdb_source(dir.path()), batcher, 2,
                                                  read_device_batch(compute));
    CHECK(got == expected);
    CHECK(batcher.refused() == 1);
    CHECK(batcher.decoders_made(0) >= 1);
  }

  TEST_CASE("a raw Datum stops an nvjpeg_batcher's pipeline with an error naming its key") {
    const crema::test::scratch_directory dir("nvjpeg-raw-datum");
    {
      crema::lmdb_writer writer(dir.path());
      put_encoded_datums(writer, photographs(1));  // 00000000_astronaut-0.jpg, ...
      const std::vector<std::byte> pixels(3 * 2 * 2, std::byte{7});
      std::vector<std::byte> value;
      crema::encode_datum({.channels = 3, .height = 2, .width = 2, .label = 1, .data = pixels},
                          value);
      writer.put("00000001_raw", value);
      writer.finish();
    }
    crema::double_buffered_pipeline pipe{
        crema::lmdb_source(dir.path()),
        crema::cuda::basic_nvjpeg_batcher<float, decoder>(every_kind().front()),
        {.batch_size = 2, .producers = 1, .threads = 1, .mode = crema::pipeline_mode::single_pass}};
    const std::string cause = cause_of_failed_pass(pipe);
    CHECK(cause.find("record 00000001_raw: raw pixels") != std::string::npos);
  }
#endif

  TEST_CASE("an nvjpeg_batcher stops its pipeline with an error naming a corrupt image") {
    const image_folder folder("nvjpeg-corrupt");
    std::filesystem::resize_file(folder.path() / "class2/3.jpg", 4000);
    crema::image_folder_source source(folder.path());
    crema::double_buffered_pipeline pipe{
        std::move(source),
        crema::cuda::basic_nvjpeg_batcher<float, decoder>(every_kind().front()),
        {.batch_size = 4, .producers = 1, .threads = 1, .mode = crema::pipeline_mode::single_pass}};
    // The finishing step fails: the pipeline's error names the batch, its cause the image.
    CHECK(cause_of_failed_pass(pipe).find("class2/3.jpg") != std::string::npos);
  }

  TEST_CASE("an nvjpeg_batcher stops its pipeline naming an image whose label floats cannot hold") {
    const image_folder folder("nvjpeg-label");
    std::ofstream(folder.path() / "list.txt") << "class0/0.jpg 3\nclass1/1.jpg 16777217\n";
    crema::double_buffered_pipeline pipe{
        crema::image_list_source(folder.path() / "list.txt", folder.path()),
        crema::cuda::basic_nvjpeg_batcher<float, decoder>(every_kind().front()),
        {.batch_size = 2, .producers = 1, .threads = 1, .mode = crema::pipeline_mode::single_pass}};
    const std::string cause = cause_of_failed_pass(pipe);
    CHECK(cause.find("class1/1.jpg") != std::string::npos);
    CHECK(cause.find("label 16777217 is not exact in the batch's 32-bit float labels") !=
          std::string::npos);
  }
}
