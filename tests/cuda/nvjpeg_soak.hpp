#pragma once

// The soak (tests/common/soak.hpp) over an nvJPEG batcher, for nvjpeg_soak_test.cpp (the fake
// nvJPEG and the counting runtime) and nvjpeg_test.cu (a GPU): pipelines of random shapes over
// image files, JPEGs the hardware engine takes, a progressive one for the GPU-assisted decoder, a
// PNG for the CPU path, now and then one cut short; decoders lent among the producers, a CPU
// share or none. Each batch is read back with cudaMemcpy once decoded, and each sample judged
// against the CPU path's sample of its image.

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/io/image/image_file.hpp>
#include <crema/io/image/image_transform.hpp>
#include <crema/io/nvjpeg/nvjpeg_batcher.hpp>

#include "common/scratch_directory.hpp"
#include "common/soak.hpp"
#include "common/test_data.hpp"
#include "nvjpeg_test_data.hpp"

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace crema::test::nvjpeg_soaking {

using soaking::pick;

/// The soak's transform: a fixed window, so that each image has one sample, unnormalised, so that
/// a sample's values are in [0, 1].
inline crema::image_transform_options soak_options() {
  return {.geometry = crema::resize_center_crop{.resize = 40, .crop_height = 32, .crop_width = 24}};
}

/// The feed's images, each the way a decoder meets it, and what the CPU path makes of each; and
/// one JPEG cut short, which no decoder can decode.
class soak_images : public scratch_directory {
 public:
  static constexpr const char* cut = "cut.jpg";

  soak_images() : scratch_directory("nvjpeg-soak") {
    const auto astronaut = read_bytes(test_data("astronaut.jpg"));
    add("astronaut.jpg", astronaut);                         // the engine's
    add("coffee.jpg", read_bytes(test_data("coffee.jpg")));  // odd sizes
    add("progressive.jpg", progressive_coffee());            // GPU-assisted
    add("coffee.png", coffee_png());                         // the CPU path's
    write_bytes(path() / cut, {astronaut.begin(), astronaut.begin() + 4000});
    crema::image_transform_options cpu = soak_options();
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
    write_bytes(path() / name, bytes);
    names.push_back(name);
  }
};

/// Which image a record is: record r the image r modulo their number, but record `cut_at` (none
/// if past the end) the one cut short.
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

/// A label says the record and its pass: r in the first pass, -(r + 1) after.
inline std::uint64_t record_of(float label) {
  return static_cast<std::uint64_t>(label >= 0 ? label : -label - 1);
}

/// Records 0 .. records - 1 of a pass as image files (`record_files`), labelled as `record_of`
/// reads them; throws as `soaking::throwing_numbers` does.
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
  soaking::throwing_numbers numbers_;
  std::uint64_t passes_ = 0;
  crema::image_file current_{};
};

/// `Batcher`, throwing on record `throw_on` as a file that cannot be read would.
template <class Batcher>
class throwing_batcher : public Batcher {
 public:
  throwing_batcher(const crema::cuda::nvjpeg_batcher_options& options, std::uint64_t throw_on)
      : Batcher(soak_options(), options), throw_on_(throw_on) {}

  void operator()(const crema::image_file& file, typename Batcher::batch& to,
                  const crema::sample_context& context) {
    if (record_of(static_cast<float>(file.label)) == throw_on_) {
      throw std::runtime_error("soak: the transform fails");
    }
    Batcher::operator()(file, to, context);
  }

 private:
  std::uint64_t throw_on_;
};

/// A batch's samples, copied to the host once decoded: intact if `same(expected, got, elements)`
/// says each is its image's.
template <class Same>
struct decoded_first_pass {
  const record_files* files;
  Same same;

  template <class Batch, class Visit>
  bool operator()(const Batch& batch, Visit&& visit) const {
    const auto on_device = batch.device();  // the host waits for the decoding
    const std::size_t elements = batch.shape().elements();
    std::vector<float> data(batch.size() * elements);
    std::vector<float> labels(batch.size());
    CREMA_CUDA_TRY(cudaMemcpy(data.data(), on_device.data.data(), data.size() * sizeof(float),
                              cudaMemcpyDeviceToHost));
    CREMA_CUDA_TRY(cudaMemcpy(labels.data(), on_device.labels.data(), labels.size() * sizeof(float),
                              cudaMemcpyDeviceToHost));
    bool intact = true;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const std::uint64_t record = record_of(labels[i]);
      const auto image = files->image_of(record);
      if (!image ||
          !same(files->images->samples[*image].data(), data.data() + i * elements, elements)) {
        intact = false;
      } else if (labels[i] >= 0) {
        visit(static_cast<std::uint32_t>(record));
      }
    }
    return intact;
  }
};

/// A batcher's options, drawn: its decoders (0: one for every producer), its CPU share, and
/// where the GPU-assisted decoder's Huffman decoding runs and how much the engine takes.
inline crema::cuda::nvjpeg_batcher_options draw_feed(std::mt19937_64& draw) {
  // Braced lists are evaluated in order.
  return {.decoders = std::array<std::size_t, 4>{0, 1, 1, 2}.at(pick(draw, 0, 3)),
          .max_host_share = static_cast<double>(pick(draw, 0, 2)) / 2,
          .decoding = {.gpu_huffman_above_pixels = pick(draw, 0, 1) == 0 ? 0U : 1'000'000U,
                       .hardware_share = pick(draw, 0, 1) == 0 ? 0.5 : 1.0}};
}

/// Images by the way they went: decoded on the CPU by a producer while every decoder was lent,
/// refused by nvJPEG (the PNG), and decoded ahead by the GPU-assisted decoder.
struct feed_counts {
  std::uint64_t host_decoded = 0;
  std::uint64_t refused = 0;
  std::uint64_t decoded_ahead = 0;
};

/// One pipeline (`soaking::one_run`) of `Batcher` over `images`, of at most `limits`, with
/// options `feed`, the devices of its consumers given by `devices_for(consumers)` (empty: the
/// current one), each sample judged by `same`; adds to `counts`. The batcher is destroyed when
/// it returns.
template <class Batcher, class DevicesFor, class Same>
soaking::run_result feed_run(std::mt19937_64& draw, soaking::ending how, const soak_images& images,
                             const soaking::run_limits& limits,
                             const crema::cuda::nvjpeg_batcher_options& feed,
                             DevicesFor&& devices_for, Same same, feed_counts& counts) {
  record_files files{&images, ~std::uint64_t{0}};
  std::optional<throwing_batcher<Batcher>> probe;  // shares the pipeline's decoders
  const soaking::run_result result = soaking::one_run(
      draw, how, limits,
      [&](std::uint32_t records, std::uint64_t throw_at) {
        if (pick(draw, 0, 9) == 0) files.cut_at = pick(draw, 0, records - 1);
        return numbered_images(files, records, throw_at);
      },
      [&](std::size_t consumers, std::uint64_t throw_on) {
        crema::cuda::nvjpeg_batcher_options each = feed;
        each.devices = devices_for(consumers);
        probe.emplace(each, throw_on);
        return *probe;
      },
      decoded_first_pass<Same>{&files, std::move(same)});
  if (probe) {
    counts.host_decoded += probe->host_decoded();
    counts.refused += probe->refused();
    counts.decoded_ahead += probe->decoded_ahead();
  }
  return result;
}

}  // namespace crema::test::nvjpeg_soaking
