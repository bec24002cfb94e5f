#pragma once

#include <benchmark/benchmark.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <vector>

namespace crema::bench::device_batches {

// Batches of 64 images of 3 x 28 x 28 bytes, turned into floats in [0, 1] and uploaded to the
// (emulated) device. The source holds 28,000 images, 66 MB: past the last-level cache of the
// machines here, so reading it is a trip to memory, as a real data set is. 4 slots of prefetch,
// 2 producers on 2 threads.
inline constexpr std::size_t batch_size = 64;
inline constexpr std::size_t channels = 3;
inline constexpr std::size_t side = 28;
inline constexpr std::size_t pixels = channels * side * side;
inline constexpr std::size_t images = 28000;
inline constexpr std::size_t prefetch = 4;
inline constexpr std::size_t producers = 2;
inline constexpr std::size_t threads = 2;

struct image {
  std::array<std::uint8_t, pixels> bytes;
  std::uint8_t label;
};

inline std::vector<image> make_images() {
  std::vector<image> made(images);
  std::uint32_t state = 1;
  for (auto& one : made) {
    for (auto& byte : one.bytes) {
      state = state * 1664525U + 1013904223U;
      byte = static_cast<std::uint8_t>(state >> 24);
    }
    one.label = static_cast<std::uint8_t>(state % 10);
  }
  return made;
}

// The consumer's training step, simulated: the thread is busy for `micros` microseconds.
inline void training_step(long micros) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(micros);
  while (std::chrono::steady_clock::now() < until) {
  }
}

// CPU time of the calling thread, in nanoseconds.
inline double thread_cpu_ns() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) * 1e9 + static_cast<double>(now.tv_nsec);
}

// Cases: the training step takes 0 or 200 microseconds.
inline void shape(benchmark::internal::Benchmark* benchmark) {
  benchmark->ArgNames({"step_us"});
  for (const long step : {0L, 200L}) benchmark->Args({step});
  benchmark->UseRealTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace crema::bench::device_batches
