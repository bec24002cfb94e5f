#pragma once

#include <benchmark/benchmark.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <new>
#include <span>
#include <utility>
#include <vector>

namespace crema::bench::reducer {

// Where the participants' buffers start. Users' buffers come from malloc or their engine's
// allocator at any 16-byte offset, not from fresh page-aligned mappings that all share their
// offset within a page: placement 0 is that lucky case, 1 to 4 start participant p's buffer
// p x 4, 8, 16 or 32 bytes into a fresh mapping of its own, 5 is plain std::vectors (large ones
// are mappings of their own too, 16 bytes in).
inline constexpr long placements = 6;
inline constexpr std::size_t placement_step[placements - 1] = {0, 4, 8, 16, 32};

inline const char* placement_name(long placement) {
  constexpr const char* names[placements] = {"page-aligned", "4 B apart",  "8 B apart",
                                             "16 B apart",   "32 B apart", "std::vector"};
  return names[placement];
}

// One buffer of `bytes` per participant, placed as `placement` says, filled with 1.
class placed_buffers {
 public:
  placed_buffers(std::size_t bytes, std::size_t participants, long placement) {
    const std::size_t elements = bytes / sizeof(float);
    for (std::size_t p = 0; p < participants; ++p) {
      float* first = nullptr;
      if (placement == placements - 1) {
        vectors_.emplace_back(elements, 1.0f);
        first = vectors_.back().data();
      } else {
        const std::size_t mapped = bytes + 4096;
        void* map = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                         0);
        if (map == MAP_FAILED) throw std::bad_alloc();
        maps_.emplace_back(map, mapped);
        first = reinterpret_cast<float*>(static_cast<char*>(map) +
                                         p * placement_step[static_cast<std::size_t>(placement)]);
        std::fill(first, first + elements, 1.0f);
      }
      spans_.emplace_back(first, elements);
    }
  }
  placed_buffers(const placed_buffers&) = delete;
  placed_buffers& operator=(const placed_buffers&) = delete;
  ~placed_buffers() {
    for (const auto& [map, size] : maps_) munmap(map, size);
  }
  [[nodiscard]] const std::vector<std::span<float>>& spans() const { return spans_; }

 private:
  std::vector<std::vector<float>> vectors_;
  std::vector<std::pair<void*, std::size_t>> maps_;
  std::vector<std::span<float>> spans_;
};

// 16 and 64 MiB of floats per participant, 2 and 4 participants, every placement.
inline void shape(benchmark::internal::Benchmark* benchmark) {
  benchmark->ArgNames({"MiB", "participants", "placement"});
  for (const long mib : {16L, 64L}) {
    for (const long participants : {2L, 4L}) {
      for (long placement = 0; placement < placements; ++placement) {
        benchmark->Args({mib, participants, placement});
      }
    }
  }
}

// NCCL's bus bandwidth: S bytes per participant in t seconds, times 2(n-1)/n.
inline double bus_bandwidth(double bytes, double seconds, double participants) {
  return bytes / seconds * 2.0 * (participants - 1.0) / participants;
}

inline void report_bus_bandwidth(benchmark::State& state, std::size_t bytes,
                                 std::size_t participants) {
  state.counters["busbw_GBps"] = benchmark::Counter(
      bus_bandwidth(static_cast<double>(bytes), 1.0, static_cast<double>(participants)) * 1e-9,
      benchmark::Counter::kIsIterationInvariantRate);
}

}  // namespace crema::bench::reducer
