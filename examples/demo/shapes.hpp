#pragma once

// The demo's dataset: ten classes of shapes drawn on 3 x 32 x 32 images, each at a random place
// and size, in a random bright colour on a random dark background, under pixel noise; written
// as Caffe Datums into an LMDB with crema's writer, as convert_imageset would. The same seed
// writes the same bytes on any machine.

#include <crema/io/caffe/datum.hpp>
#include <crema/io/lmdb/lmdb_writer.hpp>

#include <fmt/core.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <random>
#include <span>
#include <string_view>
#include <vector>

namespace demo {

inline constexpr int classes = 10;
inline constexpr int channels = 3;
inline constexpr int side = 32;

inline constexpr std::array<std::string_view, classes> class_names = {
    "disc", "ring", "square", "frame", "triangle", "plus", "cross", "h-bar", "v-bar", "diamond"};

// Whether the pixel at (dx, dy) from a shape's centre is inside shape `label` of half-size r.
inline bool inside(int label, float dx, float dy, float r) {
  const float ax = std::abs(dx), ay = std::abs(dy);
  const float stroke = std::max(2.0f, r / 3.0f);  // outlines and arms
  switch (label) {
    case 0:
      return dx * dx + dy * dy <= r * r;
    case 1: {
      const float d2 = dx * dx + dy * dy;
      return d2 <= r * r && d2 >= (r - stroke) * (r - stroke);
    }
    case 2:
      return ax <= r && ay <= r;
    case 3:
      return ax <= r && ay <= r && (ax > r - stroke || ay > r - stroke);
    case 4:
      return dy >= -r && dy <= r && ax <= (dy + r) / 2.0f;
    case 5:
      return (ax <= stroke / 2 && ay <= r) || (ay <= stroke / 2 && ax <= r);
    case 6:
      return ax <= r && ay <= r && std::abs(ax - ay) <= stroke / 2;
    case 7:
      return ax <= r && ay <= r / 3.0f;
    case 8:
      return ay <= r && ax <= r / 3.0f;
    default:
      return ax + ay <= r;
  }
}

// Makes `records` labelled images, each handed to `visit(r, label, image)` (channel-first,
// 3 x 32 x 32 bytes) as it is drawn.
template <class Visit>
void for_each_shape(int records, std::uint32_t seed, Visit&& visit) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> size(5.0f, 11.0f);
  std::uniform_int_distribution<int> dark(0, 100);
  std::uniform_int_distribution<int> bright(130, 255);
  std::normal_distribution<float> noise(0.0f, 24.0f);
  std::vector<std::byte> image(channels * side * side);
  for (int r = 0; r < records; ++r) {
    const int label = static_cast<int>(rng() % classes);
    const float half = size(rng);
    std::uniform_real_distribution<float> centre(half, static_cast<float>(side - 1) - half);
    const float cx = centre(rng), cy = centre(rng);
    std::array<int, channels> background{}, colour{};
    for (int c = 0; c < channels; ++c) background[c] = dark(rng), colour[c] = bright(rng);
    for (int y = 0; y < side; ++y) {
      for (int x = 0; x < side; ++x) {
        const bool in = inside(label, static_cast<float>(x) - cx, static_cast<float>(y) - cy, half);
        for (int c = 0; c < channels; ++c) {
          const float level = static_cast<float>(in ? colour[c] : background[c]) + noise(rng);
          image[(c * side + y) * side + x] = std::byte(std::clamp(std::lround(level), 0L, 255L));
        }
      }
    }
    visit(r, label, std::span<const std::byte>(image));
  }
}

// Writes `records` labelled images into a new LMDB at `path` (keys 00000000, 00000001, ...).
inline void write_shapes(const std::filesystem::path& path, int records, std::uint32_t seed) {
  crema::lmdb_writer writer(path);
  std::vector<std::byte> value;
  for_each_shape(records, seed, [&](int r, int label, std::span<const std::byte> image) {
    value.clear();
    crema::encode_datum(
        {.channels = channels, .height = side, .width = side, .label = label, .data = image},
        value);
    writer.put(fmt::format("{:08}", r), value);
  });
  writer.finish();
}

}  // namespace demo
