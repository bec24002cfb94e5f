#pragma once

// The two datasets of the Caffe data-layer benchmark, made once per process in a temporary
// directory (removed at exit), and what is done to them: a CIFAR-like set (50,000 records of
// 3 x 32 x 32, crop 28, batch 64) and an ImageNet-like one (5,000 of 3 x 256 x 256, crop 224,
// batch 32), raw Datums of random pixels; random crop, mirror, mean values and scale; the data
// layer on 1, 2 and 4 threads, reading alone on 2.
// CREMA_BENCH_SMALL_RECORDS and CREMA_BENCH_LARGE_RECORDS change the counts (the smoke test
// makes them tiny).

#include <crema/io/caffe/caffe_transform.hpp>
#include <crema/io/caffe/datum.hpp>
#include <crema/io/lmdb/lmdb_writer.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace crema::bench::data_layer {

// Producers and threads of the pipeline that only reads: this machine class has 2 cores.
inline constexpr std::size_t read_threads = 2;

// The data layer's cases by thread count (the pipeline's producers and threads; the hand loop's
// threads): 1, 2 and 4.
inline void by_threads(benchmark::internal::Benchmark* benchmark) {
  benchmark->ArgName("threads");
  for (const long threads : {1L, 2L, 4L}) benchmark->Arg(threads);
}

struct dataset {
  const char* name;
  const char* count_variable;
  std::size_t records;
  std::size_t side;
  std::size_t crop;
  std::size_t batch;
};

inline constexpr dataset small{"small", "CREMA_BENCH_SMALL_RECORDS", 50000, 32, 28, 64};
inline constexpr dataset large{"large", "CREMA_BENCH_LARGE_RECORDS", 5000, 256, 224, 32};

// crema's transform as a data layer uses it.
inline crema::caffe_transform transform_of(const dataset& set) {
  return crema::caffe_transform(crema::caffe_transform_options{.crop_size = set.crop,
                                                               .mirror = true,
                                                               .training = true,
                                                               .scale = 0.017f,
                                                               .mean_values = {104, 117, 123}});
}

// The database of `set`, made on first use.
class database {
 public:
  explicit database(const dataset& set) : set_(set) {
    if (const char* count = std::getenv(set.count_variable)) {
      records_ = static_cast<std::size_t>(std::strtoull(count, nullptr, 10));
    }
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("crema-bench-data-layer-{}-{}", set.name, ::getpid());
    std::filesystem::remove_all(path_);
    crema::lmdb_writer writer(
        path_, {.records_per_commit = 1000, .initial_map_bytes = std::size_t{1} << 31});
    std::vector<std::byte> pixels(3 * set.side * set.side);
    std::vector<std::byte> value;
    crema::sample_rng rng(1, 0, 0);
    for (std::size_t i = 0; i < records_; ++i) {
      for (std::size_t p = 0; p < pixels.size(); p += 8) {
        const std::uint64_t word = rng();
        for (std::size_t b = 0; b < 8 && p + b < pixels.size(); ++b) {
          pixels[p + b] = static_cast<std::byte>(word >> (8 * b));
        }
      }
      value.clear();
      const auto side = static_cast<std::int32_t>(set.side);
      crema::encode_datum({.channels = 3,
                           .height = side,
                           .width = side,
                           .label = static_cast<std::int32_t>(i % 1000),
                           .data = pixels},
                          value);
      writer.put(fmt::format("{:08}_image{}.jpg", i, i), value);
    }
    writer.finish();
  }
  database(const database&) = delete;
  database& operator=(const database&) = delete;
  ~database() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  [[nodiscard]] const std::filesystem::path& path() const noexcept { return path_; }
  [[nodiscard]] std::size_t records() const noexcept { return records_; }
  [[nodiscard]] const dataset& set() const noexcept { return set_; }

 private:
  dataset set_;
  std::size_t records_ = set_.records;
  std::filesystem::path path_;
};

// The database of `set`, shared by crema's side and the baselines.
inline const database& database_of(const dataset& set) {
  if (set.side == small.side) {
    static const database made(small);
    return made;
  }
  static const database made(large);
  return made;
}

// One pass over a database per iteration: items are records.
inline void count_records(benchmark::State& state, std::size_t records) {
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * records));
}

}  // namespace crema::bench::data_layer
