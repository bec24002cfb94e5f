#pragma once

#include <crema/core/detail/host_device.hpp>
#include <crema/core/error.hpp>
#include <crema/io/image/image_transform.hpp>
#include <crema/io/image/resample.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <vector>

/// @file
/// The resampling of an `image_transform` cut into independent values, for a batch whose
/// windows were decoded elsewhere (by nvJPEG, on the GPU): one job per sample, the weights of
/// every job in one table, and functions that compute one value each, compiled for the host and
/// the device. A kernel runs them one thread a value; a CPU test runs the same functions and
/// compares them with `image_transform`, byte for byte. The arithmetic is the transform's
/// (Pillow's weights and integer sums, the horizontal pass to 8-bit rows, then the vertical
/// pass, then ToTensor + Normalize as torch computes it), so on the same decoded pixels the
/// values are the same whichever side computes them. Component `crema::image`.

namespace crema {

/// @brief One sample's resampling: where its decoded window, its rows after the horizontal
/// pass and its output lie, and where its weights are in the batch's table. Trivially copyable:
/// the jobs go to the device as they are.
struct resample_job {
  std::uint64_t source = 0;  ///< byte offset of the decoded window's first pixel
  std::uint64_t kept = 0;    ///< byte offset of its rows after the horizontal pass
  std::uint64_t output = 0;  ///< element offset of the sample in the output
  std::int32_t channels = 0;
  std::int32_t source_stride = 0;  ///< bytes from one decoded row to the next
  std::int32_t in_width = 0;       ///< columns of the decoded window
  std::int32_t first_row = 0;      ///< the first decoded row the vertical pass reads
  std::int32_t kept_rows = 0;      ///< rows the vertical pass reads
  std::int32_t kept_width = 0;     ///< values of one channel in a kept row
  std::int32_t out_height = 0;
  std::int32_t out_width = 0;
  std::int32_t across = 0;       ///< the horizontal axis in the table: first, count, weights
  std::int32_t across_taps = 0;  ///< weights per output column
  std::int32_t down = 0;         ///< the vertical axis in the table
  std::int32_t down_taps = 0;
  std::int32_t flags = 0;  ///< `mirror`, `horizontal`, `vertical`

  static constexpr std::int32_t mirror = 1;      ///< output column x from box column W - 1 - x
  static constexpr std::int32_t horizontal = 2;  ///< the horizontal pass changes the values
  static constexpr std::int32_t vertical = 4;    ///< the vertical pass changes the values
};
static_assert(std::is_trivially_copyable_v<resample_job>);

/// @brief How a batch's values are written: float (ToTensor + Normalize) or 8-bit, channel-first
/// or interleaved. Trivially copyable: a kernel takes it by value.
struct resample_output {
  bool chw = true;
  float mean[3] = {0, 0, 0};
  float std[3] = {1, 1, 1};
};

namespace detail {

[[nodiscard]] CREMA_HOST_DEVICE inline std::uint8_t clip8_value(std::int32_t sum) noexcept {
  constexpr int bits = resample_axis::precision_bits;
  if (sum >= (std::int32_t{1} << bits << 8)) return 255;
  if (sum <= 0) return 0;
  return static_cast<std::uint8_t>(sum >> bits);
}

// One output index of an axis in the table: `first`, `count` and the weights; Pillow's sum of
// `count` inputs `step` bytes apart, the first at base[origin + first * step], rounded and
// clipped as Pillow does.
[[nodiscard]] CREMA_HOST_DEVICE inline std::uint8_t weighted_sum(
    const std::int32_t* table, std::int32_t axis, std::int32_t outputs, std::int32_t taps,
    std::int32_t index, const std::uint8_t* base, std::int64_t origin, std::int64_t step) noexcept {
  const std::int32_t* first = table + axis;
  const std::int32_t* count = first + outputs;
  const std::int32_t* weights = count + outputs + static_cast<std::int64_t>(index) * taps;
  const std::uint8_t* from = base + (origin + first[index] * step);
  std::int32_t sum = std::int32_t{1} << (resample_axis::precision_bits - 1);
  for (std::int32_t tap = 0; tap < count[index]; ++tap) sum += from[tap * step] * weights[tap];
  return clip8_value(sum);
}

}  // namespace detail

/// @brief The horizontal pass's value `index` (channel `index / kept_width`, column
/// `index % kept_width` as stored, mirrored already) of the job's kept row `row` (0 for its
/// first), from the decoded windows at `decoded`.
[[nodiscard]] CREMA_HOST_DEVICE inline std::uint8_t across_value(const resample_job& job,
                                                                 const std::int32_t* table,
                                                                 const std::uint8_t* decoded,
                                                                 std::int32_t row,
                                                                 std::int32_t index) noexcept {
  const std::int32_t c = index / job.kept_width;
  const std::int32_t stored = index % job.kept_width;
  const std::int32_t x = (job.flags & resample_job::mirror) ? job.kept_width - 1 - stored : stored;
  const std::uint8_t* in = decoded + job.source +
                           static_cast<std::uint64_t>(job.first_row + row) *
                               static_cast<std::uint64_t>(job.source_stride) +
                           c;
  if ((job.flags & resample_job::horizontal) == 0) return in[x * job.channels];
  return detail::weighted_sum(table, job.across, job.out_width, job.across_taps, x, in, 0,
                              job.channels);
}

/// @brief The vertical pass's value `index` (as `across_value`'s) of output row `row`, from the
/// job's kept rows in `kept`.
[[nodiscard]] CREMA_HOST_DEVICE inline std::uint8_t down_value(const resample_job& job,
                                                               const std::int32_t* table,
                                                               const std::uint8_t* kept,
                                                               std::int32_t row,
                                                               std::int32_t index) noexcept {
  const std::int64_t row_bytes = static_cast<std::int64_t>(job.kept_width) * job.channels;
  const std::uint8_t* in = kept + job.kept + index;  // kept row 0
  if ((job.flags & resample_job::vertical) == 0) return in[row * row_bytes];
  return detail::weighted_sum(table, job.down, job.out_height, job.down_taps, row, in,
                              -static_cast<std::int64_t>(job.first_row) * row_bytes, row_bytes);
}

/// @brief Writes output value `index` (as `across_value`'s) of output row `row`: `value`
/// normalised as torch's ToTensor + Normalize computes it, or as it is for 8-bit outputs.
template <class T>
CREMA_HOST_DEVICE inline void write_value(const resample_job& job, const resample_output& format,
                                          T* out, std::int32_t row, std::int32_t index,
                                          std::uint8_t value) noexcept {
  const std::int32_t c = index / job.out_width;
  const std::int32_t x = index % job.out_width;
  const std::uint64_t pixel = static_cast<std::uint64_t>(row) * job.out_width + x;
  const std::uint64_t at =
      format.chw ? static_cast<std::uint64_t>(c) * job.out_height * job.out_width + pixel
                 : pixel * job.channels + c;
  if constexpr (std::is_same_v<T, float>) {
    out[job.output + at] = (static_cast<float>(value) / 255.0F - format.mean[c]) / format.std[c];
  } else {
    out[job.output + at] = value;
  }
}

/// @brief A batch's resampling jobs and their weights, made on the host (from each sample's
/// `image_geometry`, drawn as the CPU path draws it) and handed to the device as one block.
/// Its buffers grow to the largest batch and are then reused.
class resample_jobs {
 public:
  /// @brief Forgets the jobs (the buffers stay).
  void clear() noexcept {
    jobs_.clear();
    table_.clear();
    kept_bytes_ = 0;
  }

  /// @brief Adds a sample whose window (`geometry.window`, at full size) was decoded to
  /// `channels` interleaved 8-bit values a pixel, `source_stride` bytes a row, at byte
  /// `source` of the decode buffer; its output goes to element `output` of the batch.
  /// @throws crema::length_error if a size does not fit the jobs' 32-bit fields
  void add(const image_geometry& geometry, bool flip, std::size_t channels, std::uint64_t source,
           std::size_t source_stride, std::uint64_t output) {
    const pixel_window& window = geometry.window;
    const resample_box box{geometry.box.top - static_cast<double>(window.top),
                           geometry.box.left - static_cast<double>(window.left),
                           geometry.box.height, geometry.box.width};
    check_fits(window.height, window.width, source_stride, geometry.out_height, geometry.out_width);
    resample_job job;
    job.source = source;
    job.output = output;
    job.channels = static_cast<std::int32_t>(channels);
    job.source_stride = static_cast<std::int32_t>(source_stride);
    job.in_width = static_cast<std::int32_t>(window.width);
    job.out_height = static_cast<std::int32_t>(geometry.out_height);
    job.out_width = static_cast<std::int32_t>(geometry.out_width);
    // As band_resampler (and Pillow): a pass that would leave the values as they are is skipped.
    const bool across = detail::pass_changes(window.width, box.left, box.width, geometry.out_width);
    const bool down = detail::pass_changes(window.height, box.top, box.height, geometry.out_height);
    job.flags = (flip ? resample_job::mirror : 0) | (across ? resample_job::horizontal : 0) |
                (down ? resample_job::vertical : 0);
    job.kept_width = across ? job.out_width : job.in_width;
    axis_.compute(window.width, box.left, box.left + box.width, geometry.out_width);
    job.across = append(axis_);
    job.across_taps = static_cast<std::int32_t>(axis_.taps_per_output);
    axis_.compute(window.height, box.top, box.top + box.height, geometry.out_height);
    job.down = append(axis_);
    job.down_taps = static_cast<std::int32_t>(axis_.taps_per_output);
    job.first_row = down ? static_cast<std::int32_t>(axis_.first.front()) : 0;
    job.kept_rows =
        down ? static_cast<std::int32_t>(axis_.first.back() + axis_.count.back()) - job.first_row
             : static_cast<std::int32_t>(window.height);
    job.kept = kept_bytes_;
    kept_bytes_ += static_cast<std::uint64_t>(job.kept_rows) *
                   static_cast<std::uint64_t>(job.kept_width) * channels;
    jobs_.push_back(job);
  }

  [[nodiscard]] std::span<const resample_job> jobs() const noexcept { return jobs_; }
  [[nodiscard]] std::span<const std::int32_t> table() const noexcept { return table_; }
  /// @return bytes the horizontal pass writes for every job together
  [[nodiscard]] std::uint64_t kept_bytes() const noexcept { return kept_bytes_; }
  /// @return the most kept rows (the horizontal kernel's grid) and output rows of any job
  [[nodiscard]] std::int32_t most_kept_rows() const noexcept {
    std::int32_t most = 0;
    for (const resample_job& job : jobs_) most = std::max(most, job.kept_rows);
    return most;
  }
  [[nodiscard]] std::int32_t most_out_rows() const noexcept {
    std::int32_t most = 0;
    for (const resample_job& job : jobs_) most = std::max(most, job.out_height);
    return most;
  }

  /// @brief The jobs then the table, as one block (for one upload): `table_offset()` bytes of
  /// jobs, then the table. Written to `to`, which holds `block_bytes()`.
  [[nodiscard]] std::size_t table_offset() const noexcept {
    return jobs_.size() * sizeof(resample_job);
  }
  [[nodiscard]] std::size_t block_bytes() const noexcept {
    return table_offset() + table_.size() * sizeof(std::int32_t);
  }
  void write_block(std::byte* to) const noexcept {
    if (!jobs_.empty()) std::memcpy(to, jobs_.data(), table_offset());
    if (!table_.empty()) {
      std::memcpy(to + table_offset(), table_.data(), table_.size() * sizeof(std::int32_t));
    }
  }

 private:
  static void check_fits(std::size_t height, std::size_t width, std::size_t stride,
                         std::size_t out_height, std::size_t out_width) {
    constexpr std::size_t most = std::size_t{1} << 30;
    if (height >= most || stride >= most || out_height * out_width * 4 >= most || width >= most) {
      detail::fail<length_error>(
          "resample_jobs: a window of {} x {} ({} bytes a row) to {} x {} does not fit the "
          "jobs' 32-bit sizes",
          height, width, stride, out_height, out_width);
    }
  }

  // The axis's first, count and weights at the table's end: @return where they start.
  std::int32_t append(const detail::resample_axis& axis) {
    const auto at = static_cast<std::int32_t>(table_.size());
    for (const std::size_t first : axis.first) table_.push_back(static_cast<std::int32_t>(first));
    for (const std::size_t count : axis.count) table_.push_back(static_cast<std::int32_t>(count));
    table_.insert(table_.end(), axis.weights.begin(), axis.weights.end());
    return at;
  }

  std::vector<resample_job> jobs_;
  std::vector<std::int32_t> table_;
  std::uint64_t kept_bytes_ = 0;
  detail::resample_axis axis_;
};

/// @brief Everything one batch's resampling reads and writes, as pointers (on the device for
/// the kernels, on the host for `run_on_host`).
template <class T>
struct resample_launch {
  const resample_job* jobs = nullptr;
  const std::int32_t* table = nullptr;
  std::int32_t count = 0;           ///< jobs
  std::int32_t most_kept_rows = 0;  ///< `resample_jobs::most_kept_rows()`
  std::int32_t most_out_rows = 0;   ///< `resample_jobs::most_out_rows()`
  resample_output format;
  const std::uint8_t* decoded = nullptr;  ///< the decoded windows (the jobs' `source` offsets)
  std::uint8_t* kept = nullptr;           ///< `resample_jobs::kept_bytes()` bytes
  T* out = nullptr;                       ///< the batch's output (the jobs' `output` offsets)
};

/// @brief Runs a launch's jobs on the host, value by value, with the functions a kernel runs:
/// the CPU twin of the GPU's resampling (for tests, and for checking a device's output).
template <class T>
void run_on_host(const resample_launch<T>& launch) {
  for (std::int32_t j = 0; j < launch.count; ++j) {
    const resample_job& job = launch.jobs[j];
    const std::int32_t values = job.kept_width * job.channels;
    for (std::int32_t row = 0; row < job.kept_rows; ++row) {
      for (std::int32_t i = 0; i < values; ++i) {
        launch.kept[job.kept + static_cast<std::uint64_t>(row) * values + i] =
            across_value(job, launch.table, launch.decoded, row, i);
      }
    }
    const std::int32_t out_values = job.out_width * job.channels;
    for (std::int32_t row = 0; row < job.out_height; ++row) {
      for (std::int32_t i = 0; i < out_values; ++i) {
        write_value(job, launch.format, launch.out, row, i,
                    down_value(job, launch.table, launch.kept, row, i));
      }
    }
  }
}

/// @brief `run_on_host` over jobs made here.
/// @param decoded the decode buffer the jobs' `source` offsets point into
/// @param kept    `jobs.kept_bytes()` bytes for the horizontal pass
/// @param out     the batch's output (the jobs' `output` offsets)
template <class T>
void run_resample_jobs(const resample_jobs& jobs, const resample_output& format,
                       const std::uint8_t* decoded, std::uint8_t* kept, T* out) {
  run_on_host(resample_launch<T>{
      jobs.jobs().data(), jobs.table().data(), static_cast<std::int32_t>(jobs.jobs().size()),
      jobs.most_kept_rows(), jobs.most_out_rows(), format, decoded, kept, out});
}

}  // namespace crema
