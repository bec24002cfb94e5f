#pragma once

// What the nvJPEG tests share: batches of the photographs (and one PNG, which takes the CPU
// path), a folder of them in three classes, and one ordered epoch of a folder pipeline read back
// as (data, labels) per batch, also while the test holds the pipeline's nvJPEG decoder.

#include <crema/io/image/image_codec.hpp>
#include <crema/io/image/image_folder_source.hpp>
#include <crema/io/nvjpeg/nvjpeg_batch_decoder.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include "common/scratch_directory.hpp"
#include "common/test_data.hpp"

#include <fmt/format.h>

#include <turbojpeg.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace crema::test {

// The coffee photograph as a PNG: decoded by the CPU path, whatever the decoder.
inline std::vector<std::byte> coffee_png() {
  crema::image_decoder decoder({.channels = 3, .order = crema::channel_order::rgb});
  std::vector<std::byte> png;
  crema::encode_png(decoder.decode(read_bytes(test_data("coffee.jpg")), "coffee.jpg"), png,
                    crema::channel_order::rgb);
  return png;
}

// The coffee photograph as a progressive JPEG (the same coefficients, rewritten losslessly):
// nvJPEG's hardware engine takes baseline JPEGs only.
inline std::vector<std::byte> progressive_coffee() {
  const std::vector<std::byte> baseline = read_bytes(test_data("coffee.jpg"));
  const crema::detail::tj_handle handle(tjInitTransform());
  tjtransform how{};
  how.op = TJXOP_NONE;
  how.options = TJXOPT_PROGRESSIVE;
  unsigned char* made = nullptr;
  unsigned long size = 0;
  if (!handle ||
      tjTransform(handle.get(), reinterpret_cast<const unsigned char*>(baseline.data()),
                  static_cast<unsigned long>(baseline.size()), 1, &made, &size, &how, 0) != 0) {
    tjFree(made);
    throw std::runtime_error("progressive_coffee: TurboJPEG cannot rewrite coffee.jpg");
  }
  const auto* first = reinterpret_cast<const std::byte*>(made);
  std::vector<std::byte> progressive(first, first + size);
  tjFree(made);
  return progressive;
}

// A scratch folder of three classes, removed with it: the photographs, five a class, and the coffee
// photograph as a PNG in one.
class image_folder : public scratch_directory {
 public:
  explicit image_folder(const std::string& name) : scratch_directory(name) {
    const auto astronaut = read_bytes(test_data("astronaut.jpg"));
    const auto coffee = read_bytes(test_data("coffee.jpg"));
    for (std::size_t label = 0; label < 3; ++label) {
      for (std::size_t i = 0; i < 5; ++i) {
        write_bytes(path() / fmt::format("class{}/{}.jpg", label, i),
                    (label + i) % 2 == 0 ? astronaut : coffee);
      }
    }
    write_bytes(path() / "class1/9.png", coffee_png());
  }
};

using batches = std::vector<std::pair<std::vector<float>, std::vector<float>>>;

// One ordered pass of `source` as (data, labels) per batch, through `batcher`; `read` gives a
// batch's data and labels on the host.
template <class Source, class Batcher, class Read>
batches ordered_pass(Source source, Batcher batcher, std::size_t producers, Read read) {
  crema::double_buffered_pipeline pipe{std::move(source),
                                       std::move(batcher),
                                       {.batch_size = 4,
                                        .producers = producers,
                                        .threads = 2,
                                        .mode = crema::pipeline_mode::single_pass,
                                        .ordered = true,
                                        .seed = 99}};
  batches out;
  for (auto batch : pipe.consumer(0)) out.push_back(read(batch));
  return out;
}

// One ordered epoch of the folder at `root`, shuffled, as `ordered_pass` gives it.
template <class Batcher, class Read>
batches epoch(const std::filesystem::path& root, Batcher batcher, std::size_t producers,
              Read read) {
  crema::image_folder_source source(root);
  source.shuffle(5);
  return ordered_pass(std::move(source), std::move(batcher), producers, std::move(read));
}

// One epoch of `root` through `batcher`, as `epoch` gives it, while the test holds the batcher's
// decoder of `device` (its only one) until `happened()`, or for 10 s at most: what the producers
// do while they cannot borrow it, whatever the machine's speed. @return the batches, and whether
// it happened while the decoder was held.
template <class Batcher, class Read, class Condition>
std::pair<batches, bool> epoch_while_held(const std::filesystem::path& root, const Batcher& batcher,
                                          int device, std::size_t producers, Read read,
                                          Condition happened) {
  std::optional<typename Batcher::decoder_pool::loan> held(batcher.decoders().borrow(device));
  std::atomic<bool> seen{false};
  const std::jthread give_back([&] {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!happened() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    seen = happened();
    held.reset();
  });
  batches got = epoch(root, batcher, producers, std::move(read));
  return {std::move(got), seen.load()};
}

// A batch for the decoder: the files, their keys, and the images (with each sample's generator).
struct batch_input {
  std::vector<std::vector<std::byte>> files;
  std::vector<std::string> keys;
  std::vector<crema::cuda::encoded_image> images;

  void add(std::vector<std::byte> bytes, std::string key, std::uint64_t seed) {
    files.push_back(std::move(bytes));
    keys.push_back(std::move(key));
    rebuild(seed);
  }
  void rebuild(std::uint64_t seed) {
    images.clear();
    for (std::size_t i = 0; i < files.size(); ++i) {
      images.push_back({files[i], crema::sample_rng(seed, 0, i), keys[i]});
    }
  }
};

// The photographs, `copies` times each, and the coffee photograph as a PNG (the CPU path's).
inline batch_input photographs(std::size_t copies, std::uint64_t seed = 11) {
  batch_input in;
  const auto astronaut = read_bytes(test_data("astronaut.jpg"));
  const auto coffee = read_bytes(test_data("coffee.jpg"));
  for (std::size_t i = 0; i < copies; ++i) {
    in.add(astronaut, fmt::format("astronaut-{}.jpg", i), seed);
    in.add(coffee, fmt::format("coffee-{}.jpg", i), seed);
  }
  in.add(coffee_png(), "coffee.png", seed);
  return in;
}

// Reads a host batch's data (`sample` values a record) and labels, for `epoch`.
inline auto read_host_batch(std::size_t sample) {
  return [sample](auto& batch) {
    const std::size_t size = batch->size();
    return std::pair(
        std::vector<float>(batch->data.begin(),
                           batch->data.begin() + static_cast<std::ptrdiff_t>(size * sample)),
        std::vector<float>(batch->labels.begin(),
                           batch->labels.begin() + static_cast<std::ptrdiff_t>(size)));
  };
}

}  // namespace crema::test
