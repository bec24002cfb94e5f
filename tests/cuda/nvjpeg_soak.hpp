#pragma once

// The soak (tests/common/soak.hpp) over an nvJPEG batcher, for nvjpeg_soak_test.cpp (the fake
// nvJPEG and the counting runtime) and nvjpeg_test.cu (a GPU): pipelines of random shapes over
// image files or encoded Datums, of float or 8-bit samples: JPEGs the hardware engine takes, a
// progressive one for the GPU-assisted decoder, a PNG for the CPU path, now and then one cut
// short; decoders lent among the producers, a CPU share or none. Each batch is read back with
// cudaMemcpy once decoded, and each sample judged against the CPU path's sample of its image.

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/io/caffe/datum.hpp>
#include <crema/io/image/image_file.hpp>
#include <crema/io/image/image_transform.hpp>
#include <crema/io/nvjpeg/nvjpeg_batcher.hpp>

#include "common/scratch_directory.hpp"
#include "common/soak.hpp"
#include "common/test_data.hpp"
#include "nvjpeg_test_data.hpp"

#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace crema::test::nvjpeg_soaking {

using soaking::pick;

/// The soak's transform: a fixed window, so that each image has one sample, unnormalised, so that
/// a sample's values are in [0, 1].
inline crema::image_transform_options soak_options() {
  return {.geometry = crema::resize_center_crop{.resize = 40, .crop_height = 32, .crop_width = 24}};
}

/// The feed's images, each the way a decoder meets it, and what the CPU path makes of each, in
/// floats and in 8 bits; and one JPEG cut short, which no decoder can decode.
class soak_images : public scratch_directory {
 public:
  static constexpr const char* cut = "cut.jpg";

  soak_images() : scratch_directory("nvjpeg-soak") {
    const auto astronaut = read_bytes(test_data("astronaut.jpg"));
    add("astronaut.jpg", astronaut);                         // the engine's
    add("coffee.jpg", read_bytes(test_data("coffee.jpg")));  // odd sizes
    add("progressive.jpg", progressive_coffee());            // GPU-assisted
    add("coffee.png", coffee_png());                         // the CPU path's
    cut_bytes.assign(astronaut.begin(), astronaut.begin() + 4000);
    write_bytes(path() / cut, cut_bytes);
    crema::image_transform_options cpu = soak_options();
    cpu.decode.dct_scaling = false;  // as the GPU decodes: at full size
    crema::image_transform transform(cpu);
    const std::size_t elements = transform.shape().elements();
    for (std::size_t image = 0; image < names.size(); ++image) {
      floats_.emplace_back(elements);
      transform(files[image], std::span(floats_.back()), crema::sample_rng(0, 0, 0), names[image]);
      levels_.emplace_back(elements);
      transform(files[image], std::span(levels_.back()), crema::sample_rng(0, 0, 0), names[image]);
    }
  }

  /// @return the CPU path's sample of image `image`, of T (float or std::uint8_t)
  template <class T>
  [[nodiscard]] const std::vector<T>& sample(std::size_t image) const {
    if constexpr (std::is_same_v<T, float>) {
      return floats_[image];
    } else {
      return levels_[image];
    }
  }

  std::vector<std::string> names;
  std::vector<std::vector<std::byte>> files;  // by name
  std::vector<std::byte> cut_bytes;

 private:
  void add(const std::string& name, const std::vector<std::byte>& bytes) {
    write_bytes(path() / name, bytes);
    names.push_back(name);
    files.push_back(bytes);
  }

  std::vector<std::vector<float>> floats_;  // by name
  std::vector<std::vector<std::uint8_t>> levels_;
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
  [[nodiscard]] std::span<const std::byte> bytes(std::uint64_t record) const {
    const auto image = image_of(record);
    return image ? std::span<const std::byte>(images->files[*image])
                 : std::span<const std::byte>(images->cut_bytes);
  }
};

/// A label says the record and its pass: r in the first pass, -(r + 1) after.
inline std::int32_t label_of(std::uint32_t record, std::uint64_t passes) {
  return passes == 0 ? static_cast<std::int32_t>(record) : -static_cast<std::int32_t>(record) - 1;
}
inline std::uint64_t record_of(float label) {
  return static_cast<std::uint64_t>(label >= 0 ? label : -label - 1);
}

/// A record as an image file under the images' folder.
class as_image_files {
 public:
  using record_type = crema::image_file;
  static constexpr const char* kind = "soak-images";

  explicit as_image_files(const record_files& files) : root_(files.images->path().string()) {}

  const crema::image_file& make(const record_files& files, std::uint32_t record,
                                std::int32_t label) {
    made_ = {
        .root = root_, .relative = files.relative(record), .label = label, .list = {}, .line = 0};
    return made_;
  }

 private:
  std::string root_;
  crema::image_file made_{};
};

/// An encoded Datum, keyed as Caffe's convert_imageset keys them (a `crema::datum_record`, as
/// `lmdb_source` gives), and its record's number. It owns its bytes: the pipeline copies a
/// record of a source whose records are not stable, and a copy of views into the source's
/// buffers would change under it.
struct soak_datum {
  std::vector<std::byte> value;
  std::string key;
  std::uint32_t number = 0;

  [[nodiscard]] std::string_view key_text() const noexcept { return key; }
};

/// A record as an encoded Datum of its image, the label in it.
class as_encoded_datums {
 public:
  using record_type = soak_datum;
  static constexpr const char* kind = "soak-datums";

  explicit as_encoded_datums(const record_files& /*files*/) {}

  const soak_datum& make(const record_files& files, std::uint32_t record, std::int32_t label) {
    made_.value.clear();
    crema::encode_datum({.label = label, .encoded = true, .data = files.bytes(record)},
                        made_.value);
    made_.key.clear();
    fmt::format_to(std::back_inserter(made_.key), "{:08}_{}", record, files.relative(record));
    made_.number = record;
    return made_;
  }

 private:
  soak_datum made_{};
};

/// Records 0 .. records - 1 of a pass as `As` makes them (`as_image_files`, `as_encoded_datums`),
/// labelled as `label_of` says; throws as `soaking::throwing_numbers` does.
template <class As>
class numbered_records {
 public:
  using record_type = typename As::record_type;
  static constexpr bool records_are_stable = false;

  numbered_records(const record_files& files, std::uint32_t records, std::uint64_t throw_at)
      : files_(files), as_(files), numbers_(records, throw_at) {}

  const record_type* next() {
    const std::uint32_t* record = numbers_.next();
    if (record == nullptr) return nullptr;
    return &as_.make(files_, *record, label_of(*record, passes_));
  }
  void rewind() {
    numbers_.rewind();
    ++passes_;
  }
  void shard(std::size_t rank, std::size_t world) { numbers_.shard(rank, world); }
  [[nodiscard]] crema::record_position position() const { return numbers_.position(); }
  void seek(crema::record_position position) { numbers_.seek(position); }
  [[nodiscard]] std::string key() const { return std::string(As::kind) + ":" + numbers_.key(); }

 private:
  record_files files_;
  As as_;
  soaking::throwing_numbers numbers_;
  std::uint64_t passes_ = 0;
};

/// `Batcher`, throwing on record `throw_on` as a file that cannot be read would.
template <class Batcher>
class throwing_batcher : public Batcher {
 public:
  throwing_batcher(const crema::cuda::nvjpeg_batcher_options& options, std::uint64_t throw_on)
      : Batcher(soak_options(), options), throw_on_(throw_on) {}

  void operator()(const crema::image_file& file, typename Batcher::batch& to,
                  const crema::sample_context& context) {
    fail_on(record_of(static_cast<float>(file.label)));
    Batcher::operator()(file, to, context);
  }
  void operator()(const soak_datum& datum, typename Batcher::batch& to,
                  const crema::sample_context& context) {
    fail_on(datum.number);
    Batcher::operator()(datum, to, context);
  }

 private:
  void fail_on(std::uint64_t record) const {
    if (record == throw_on_) throw std::runtime_error("soak: the transform fails");
  }

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
    using value_type = typename Batch::value_type;
    using label_type = typename Batch::label_type;
    const auto on_device = batch.device();  // the host waits for the decoding
    const std::size_t elements = batch.shape().elements();
    std::vector<value_type> data(batch.size() * elements);
    std::vector<label_type> labels(batch.size());
    CREMA_CUDA_TRY(cudaMemcpy(data.data(), on_device.data.data(), data.size() * sizeof(value_type),
                              cudaMemcpyDeviceToHost));
    CREMA_CUDA_TRY(cudaMemcpy(labels.data(), on_device.labels.data(),
                              labels.size() * sizeof(label_type), cudaMemcpyDeviceToHost));
    bool intact = true;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      const std::uint64_t record = record_of(static_cast<float>(labels[i]));
      const auto image = files->image_of(record);
      if (!image || !same(files->images->sample<value_type>(*image).data(),
                          data.data() + i * elements, elements)) {
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

/// Pipelines by what they fed, and images by the way they went: decoded on the CPU by a producer
/// while every decoder was lent, refused by nvJPEG (the PNG), and decoded ahead by the GPU-assisted
/// decoder.
struct feed_counts {
  std::size_t datum_runs = 0;
  std::size_t byte_runs = 0;  // of 8-bit samples
  std::uint64_t host_decoded = 0;
  std::uint64_t refused = 0;
  std::uint64_t decoded_ahead = 0;
};

/// One pipeline (`soaking::one_run`) of `Batcher<T>` over `images`, T float or std::uint8_t and
/// the records image files or encoded Datums (both drawn), of at most `limits`, with options
/// `feed`, the devices of its consumers given by `devices_for(consumers)` (empty: the current
/// one), each sample judged by `same(expected, got, elements)` (of T); adds to `counts`. The
/// batcher is destroyed when it returns.
template <template <class> class Batcher, class DevicesFor, class Same>
soaking::run_result feed_run(std::mt19937_64& draw, soaking::ending how, const soak_images& images,
                             const soaking::run_limits& limits,
                             const crema::cuda::nvjpeg_batcher_options& feed,
                             DevicesFor&& devices_for, Same same, feed_counts& counts) {
  const auto run = [&]<class T, class As>(std::type_identity<T>, std::type_identity<As>) {
    record_files files{&images, ~std::uint64_t{0}};
    std::optional<throwing_batcher<Batcher<T>>> probe;  // shares the pipeline's decoders
    const soaking::run_result result = soaking::one_run(
        draw, how, limits,
        [&](std::uint32_t records, std::uint64_t throw_at) {
          if (pick(draw, 0, 9) == 0) files.cut_at = pick(draw, 0, records - 1);
          return numbered_records<As>(files, records, throw_at);
        },
        [&](std::size_t consumers, std::uint64_t throw_on) {
          crema::cuda::nvjpeg_batcher_options each = feed;
          each.devices = devices_for(consumers);
          probe.emplace(each, throw_on);
          return *probe;
        },
        decoded_first_pass<Same>{&files, same});
    if (probe) {
      counts.host_decoded += probe->host_decoded();
      counts.refused += probe->refused();
      counts.decoded_ahead += probe->decoded_ahead();
    }
    return result;
  };
  const bool bytes = pick(draw, 0, 1) == 1;
  const bool datums = pick(draw, 0, 1) == 1;
  counts.byte_runs += bytes ? 1 : 0;
  counts.datum_runs += datums ? 1 : 0;
  using files = std::type_identity<as_image_files>;
  using encoded = std::type_identity<as_encoded_datums>;
  if (bytes) {
    return datums ? run(std::type_identity<std::uint8_t>{}, encoded{})
                  : run(std::type_identity<std::uint8_t>{}, files{});
  }
  return datums ? run(std::type_identity<float>{}, encoded{})
                : run(std::type_identity<float>{}, files{});
}

}  // namespace crema::test::nvjpeg_soaking
