// The soak (tests/common/soak.hpp) over the nvJPEG batcher, on the fake nvJPEG and the counting
// runtime: pipelines of random shapes over image files (JPEGs the hardware engine takes, a
// progressive one for the GPU-assisted decoder, a PNG for the CPU path, now and then one cut
// short), with decoders lent among the producers, a CPU share or none, the engine or none, one
// device or two, stopped, destroyed under their consumers or run to the end of their pass, over a
// source and a transform that throw now and then, and a runtime that fails now and then. Every
// sample delivered must be its image's, every whole pass exact, every pipeline must end, and one
// that met no fault of the runtime's must leave no memory, stream, event or nvJPEG object behind.
// 2,000 records by default, so that CI runs it; CREMA_SOAK_RECORDS for more.
#include <crema/io/image/image_file.hpp>
#include <crema/io/image/image_transform.hpp>
#include <crema/io/nvjpeg/nvjpeg_batcher.hpp>

#include "common/scratch_directory.hpp"
#include "common/soak.hpp"
#include "common/test_data.hpp"
#include "common/watchdog.hpp"
#include "counting_runtime.hpp"
#include "fake_nvjpeg.hpp"
#include "host_nvjpeg_decoder.hpp"
#include "nvjpeg_test_data.hpp"

#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using namespace crema::test::soaking;
namespace counting = crema::test::counting_cuda;
namespace fake = crema::test::fake_nvjpeg;
using crema::test::read_bytes;
using crema::test::test_data;

// The feed's images, each the way a decoder meets it, and what the CPU path makes of each; and
// one JPEG cut short, which no decoder can decode.
class soak_images : public crema::test::scratch_directory {
 public:
  static constexpr const char* cut = "cut.jpg";

  explicit soak_images(const crema::image_transform_options& options)
      : scratch_directory("nvjpeg-soak") {
    const auto astronaut = read_bytes(test_data("astronaut.jpg"));
    add("astronaut.jpg", astronaut);                            // the engine's
    add("coffee.jpg", read_bytes(test_data("coffee.jpg")));     // odd sizes
    add("progressive.jpg", crema::test::progressive_coffee());  // GPU-assisted
    add("coffee.png", crema::test::coffee_png());               // the CPU path's
    crema::test::write_bytes(path() / cut, {astronaut.begin(), astronaut.begin() + 4000});
    crema::image_transform_options cpu = options;
    cpu.decode.dct_scaling = false;  // as the GPU decodes: at full size
    crema::image_transform transform(cpu);
    for (const std::string& name : names) {
      samples.emplace_back(transform.shape().elements());
      transform(read_bytes(path() / name), std::span(samples.back()), crema::sample_rng(0, 0, 0),
                name);
    }
  }

  std::vector<std::string> names;
  std::vector<std::vector<float>> samples;  // by name

 private:
  void add(const std::string& name, const std::vector<std::byte>& bytes) {
    crema::test::write_bytes(path() / name, bytes);
    names.push_back(name);
  }
};

// Which image a record is: record r the image r modulo their number, but record `cut_at` (none
// if past the end) the one cut short.
struct record_files {
  const soak_images* images;
  std::uint64_t cut_at;

  [[nodiscard]] std::optional<std::size_t> image_of(std::uint64_t record) const {
    if (record == cut_at) return std::nullopt;
    return record % images->names.size();
  }
  [[nodiscard]] std::string_view relative(std::uint64_t record) const {
    const auto image = image_of(record);
    return image ? std::string_view(images->names[*image]) : std::string_view(soak_images::cut);
  }
};

// A label says the record and its pass: r in the first pass, -(r + 1) after.
std::uint64_t record_of(float label) {
  return static_cast<std::uint64_t>(label >= 0 ? label : -label - 1);
}

// Records 0 .. records - 1 of a pass as image files (`record_files`), labelled as `record_of`
// reads them; throws as `throwing_numbers` does.
class numbered_images {
 public:
  using record_type = crema::image_file;
  static constexpr bool records_are_stable = false;

  numbered_images(const record_files& files, std::uint32_t records, std::uint64_t throw_at)
      : files_(files), root_(files.images->path().string()), numbers_(records, throw_at) {}

  const crema::image_file* next() {
    const std::uint32_t* record = numbers_.next();
    if (record == nullptr) return nullptr;
    current_ = {.root = root_,
                .relative = files_.relative(*record),
                .label = passes_ == 0 ? static_cast<std::int32_t>(*record)
                                      : -static_cast<std::int32_t>(*record) - 1,
                .list = {},
                .line = 0};
    return &current_;
  }
  void rewind() {
    numbers_.rewind();
    ++passes_;
  }
  void shard(std::size_t rank, std::size_t world) { numbers_.shard(rank, world); }
  [[nodiscard]] crema::record_position position() const { return numbers_.position(); }
  void seek(crema::record_position position) { numbers_.seek(position); }
  [[nodiscard]] std::string key() const { return "soak-images:" + numbers_.key(); }

 private:
  record_files files_;
  std::string root_;
  throwing_numbers numbers_;
  std::uint64_t passes_ = 0;
  crema::image_file current_{};
};

using batcher = crema::cuda::basic_nvjpeg_batcher<float, crema::test::host_nvjpeg_decoder>;

// The batcher, throwing on record `throw_on` as a file that cannot be read would.
class throwing_batcher : public batcher {
 public:
  throwing_batcher(const crema::image_transform_options& transform,
                   const crema::cuda::nvjpeg_batcher_options& options, std::uint64_t throw_on)
      : batcher(transform, options), throw_on_(throw_on) {}

  void operator()(const crema::image_file& file, batch& to, const crema::sample_context& context) {
    if (record_of(static_cast<float>(file.label)) == throw_on_) {
      throw std::runtime_error("soak: the transform fails");
    }
    batcher::operator()(file, to, context);
  }

 private:
  std::uint64_t throw_on_;
};

// A batch's samples, read from the device once decoded (the counting runtime's device memory is
// the host's): intact if each is its image's, byte for byte.
struct decoded_first_pass {
  const record_files* files;

  template <class Batch, class Visit>
  bool operator()(const Batch& batch, Visit&& visit) const {
    const auto on_device = batch.device();  // waits for the decoding
    const std::size_t elements = batch.shape().elements();
    bool intact = true;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const float label = on_device.labels.data()[i];
      const std::uint64_t record = record_of(label);
      const auto image = files->image_of(record);
      const float* sample = on_device.data.data() + i * elements;
      if (!image || !std::equal(sample, sample + elements, files->images->samples[*image].data())) {
        intact = false;
      } else if (label >= 0) {
        visit(static_cast<std::uint32_t>(record));
      }
    }
    return intact;
  }
};

// The calls a feed of nvJPEG-decoded batches makes while it runs, any of which a GPU may fail.
constexpr std::array failing_calls{
    counting::call::memcpy_async,      counting::call::event_record,
    counting::call::stream_wait_event, counting::call::event_synchronize,
    counting::call::event_query,       counting::call::allocate};

}  // namespace

TEST_CASE(
    "soak: pipelines of nvJPEG-decoded batches stopped, destroyed and failing at random, the "
    "runtime too, deliver each image's sample, leave nothing behind, and every whole pass is "
    "exact") {
  const crema::image_transform_options options{
      .geometry = crema::resize_center_crop{.resize = 40, .crop_height = 32, .crop_width = 24},
      .mean = {0.485F, 0.456F, 0.406F},
      .std = {0.229F, 0.224F, 0.225F}};
  const soak_images images(options);
  const run_limits limits{.records = 160, .batch_size = 12, .stop_after = 8};
  std::size_t leaks = 0;
  std::size_t faulty = 0;
  std::uint64_t failed_calls = 0;
  std::uint64_t mixed_devices = 0;
  std::size_t left_on_purpose = 0;
  // Images by the way they went: decoded on the CPU by a producer while every decoder was lent,
  // refused by nvJPEG (the PNG), and decoded ahead by the GPU-assisted decoder.
  std::uint64_t host_decoded = 0;
  std::uint64_t refused = 0;
  std::uint64_t decoded_ahead = 0;
  soak(
      [&](std::mt19937_64& draw, ending how) {
        const crema::test::watchdog guard(std::chrono::seconds(60), "an nvJPEG soak's pipeline");
        const fake::scoped_behaviour gpu({.hardware_engine = pick(draw, 0, 3) != 0});
        const crema::cuda::nvjpeg_batcher_options feed{
            .decoders = std::array<std::size_t, 4>{0, 1, 1, 2}.at(pick(draw, 0, 3)),
            .max_host_share = static_cast<double>(pick(draw, 0, 2)) / 2,
            .decoding = {.gpu_huffman_above_pixels = pick(draw, 0, 1) == 0 ? 0U : 1'000'000U,
                         .hardware_share = pick(draw, 0, 1) == 0 ? 0.5 : 1.0}};
        const bool two_devices = pick(draw, 0, 1) == 1;
        const bool fails = pick(draw, 0, 9) == 0;
        bool sticky = false;
        if (fails) {
          ++faulty;
          const counting::call kind = failing_calls.at(pick(draw, 0, failing_calls.size() - 1));
          const std::uint64_t after = pick(draw, 0, 100);
          sticky = pick(draw, 0, 1) == 1;
          counting::fail_call(kind, after, cudaErrorLaunchFailure, sticky);
        }
        std::optional<counting::devices_for_scope> devices;
        std::optional<throwing_batcher> probe;  // shares the pipeline's decoders
        record_files files{&images, ~std::uint64_t{0}};
        const auto held = counting::held();
        const std::size_t objects = fake::live_objects();
        const std::uint64_t across = counting::calls_across_devices();
        run_result result = one_run(
            draw, how, limits,
            [&](std::uint32_t records, std::uint64_t throw_at) {
              if (pick(draw, 0, 9) == 0) files.cut_at = pick(draw, 0, records - 1);
              return numbered_images(files, records, throw_at);
            },
            [&](std::size_t consumers, std::uint64_t throw_on) {
              crema::cuda::nvjpeg_batcher_options each = feed;
              if (consumers == 2 && two_devices) {
                devices.emplace(2);
                each.devices = {0, 1};
              }
              probe.emplace(options, each, throw_on);
              return *probe;
            },
            decoded_first_pass{&files});
        host_decoded += probe->host_decoded();
        refused += probe->refused();
        decoded_ahead += probe->decoded_ahead();
        probe.reset();
        mixed_devices += counting::calls_across_devices() - across;
        if (fails) {
          failed_calls += counting::failed_calls();
          counting::heal();
          result.other_errors = 0;  // a consumer's own wait may fail
        }
        leaks += counting::held() == held ? 0 : 1;
        if (sticky) {
          // After a fault for good, the decoders' nvJPEG objects are left on purpose (destroying
          // them may wait on the faulted GPU); a process would have ended.
          left_on_purpose += fake::reclaim_objects();
        } else {
          leaks += fake::live_objects() > objects ? 1 : 0;
        }
        return result;
      },
      2'000);
  MESSAGE(faulty << " pipelines on a failing runtime, " << failed_calls << " calls failed, "
                 << left_on_purpose << " nvJPEG objects left after faults for good; images "
                 << host_decoded << " decoded while the decoders were lent, " << refused
                 << " refused, " << decoded_ahead << " decoded ahead");
  CHECK(leaks == 0);
  CHECK(mixed_devices == 0);
  CHECK(failed_calls > 0);
  WARN(host_decoded > 0);  // as producers happened to meet: timing
  CHECK(refused > 0);
  CHECK(decoded_ahead > 0);
}
