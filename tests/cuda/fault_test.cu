// What a kernel's fault does to crema's GPU feed, on a real GPU. After an illegal address, every
// later runtime call of the process fails with it: a pipeline of device batches (and an
// nvjpeg_batcher's, where nvJPEG is built) must stop with a cuda_error, give back what it lent
// and be destroyed, never hang. Each case runs in a child process, as the fault leaves its CUDA
// context failing every call; the test program itself never touches CUDA. Not run under
// compute-sanitizer, which would report the fault made on purpose. counting_runtime_test.cpp and
// nvjpeg_host_test.cpp check the same without a GPU, on a runtime made to fail.
#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/pipeline/batch_uploader.hpp>
#include <crema/pipeline/cuda/device_batch.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#if defined(CREMA_FAULT_TEST_NVJPEG)
#include <crema/io/nvjpeg/nvjpeg_batcher.cuh>

#include "nvjpeg_test_data.hpp"
#endif

#include "common/child_process.hpp"
#include "common/pipeline_failure.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace std::chrono_literals;

// Sums a batch's values into `sum`; where `fault` is not null, writes through it as well (an
// address no allocation holds: the kernel faults).
__global__ void consume(const float* data, std::size_t size, float* sum, int* fault) {
  float local = 0.0F;
  for (std::size_t i = threadIdx.x; i < size; i += blockDim.x) local += data[i];
  atomicAdd(sum, local);
  if (fault != nullptr && threadIdx.x == 0) *fault = 1;
}

// The consumer's step on batch `pulled` (from 0), queued on `compute`: batch 20 faults.
void consume_on(const float* data, std::size_t size, float* sum, std::size_t pulled,
                cudaStream_t compute) {
  int* const fault = pulled == 20 ? reinterpret_cast<int*>(std::uintptr_t{16}) : nullptr;
  consume<<<1, 256, 0, compute>>>(data, size, sum, fault);
  CREMA_CUDA_TRY(cudaGetLastError());
}

// The CUDA error code an exception stands for: a cuda_error's, or that of the cuda_error a
// pipeline_error nests; -1 for any other.
int cuda_code_of(const std::exception& error) {
  if (const auto* cuda = dynamic_cast<const crema::cuda_error*>(&error)) return cuda->code();
  try {
    std::rethrow_if_nested(error);
  } catch (const crema::cuda_error& nested) {
    return nested.code();
  } catch (...) {
  }
  return -1;
}

// A line in the test's log, written at once: where a child that hangs got to.
void log_step(const std::string& what) {
  std::fprintf(stderr, "fault test: %s\n", what.c_str());
  std::fflush(stderr);
}

void skip_without_device() {
  if (crema::cuda::device_count() == 0) throw crema::test::child_skip{"no CUDA device"};
}

// Runs `feed` in a child; checks it ended with a cuda_error (no other error, no hang, no crash).
// `feed` returns "<cuda code>|<batches pulled>|<message>", or "none|<pulled>" if nothing failed.
// @return false, after the line that reports the test skipped, where there is no GPU
template <class Feed>
bool check_stops_on_fault(Feed feed) {
  const crema::test::child_report report = crema::test::run_in_child(60s, feed);
  if (report.skipped) {
    std::printf("crema-test-skip: %s\n", report.text.c_str());
    return false;
  }
  CAPTURE(report.text);
  CHECK_FALSE(report.hung);
  REQUIRE(report.exit_code == 0);
  int code = 0;
  std::size_t pulled = 0;
  REQUIRE(std::sscanf(report.text.c_str(), "%d|%zu|", &code, &pulled) == 2);
  // An access past any allocation: cudaErrorIllegalAddress, or where the driver does not say
  // which, cudaErrorLaunchFailure; nvJPEG's own status where one of its calls met it first.
  CHECK(code > 0);
  CHECK(pulled >= 20);  // the 20 batches before the fault were delivered
  return true;
}

struct fill_on_host {
  using batch_type = crema::cuda::device_batch<float>;
  std::shared_ptr<crema::batch_uploader<crema::cuda_stream>> uploader;

  batch_type make_batch(const crema::batch_context& where) const {
    constexpr crema::record_shape shape{3, 28, 28};
    return uploader ? batch_type(where.batch_size, shape, uploader)
                    : batch_type(where.batch_size, shape);
  }
  void operator()(const int& record, batch_type& batch, const crema::sample_context& sample) const {
    const auto pixels = batch.record(sample.index);
    std::fill(pixels.begin(), pixels.end(), static_cast<float>(record % 256));
    batch.set_label(sample.index, static_cast<float>(record % 10));
  }
};

}  // namespace

TEST_SUITE("cuda faults") {
  TEST_CASE("a consumer kernel's fault stops a pipeline of device batches with its cuda_error") {
    for (const bool uploader : {false, true}) {
      CAPTURE(uploader);
      const bool ran = check_stops_on_fault([uploader] {
        skip_without_device();
        crema::cuda_stream compute;
        float* sum = nullptr;
        CREMA_CUDA_TRY(cudaMalloc(&sum, sizeof(float)));
        std::size_t pulled = 0;
        try {
          std::vector<int> records(64 * 2000);
          for (std::size_t i = 0; i < records.size(); ++i) records[i] = static_cast<int>(i);
          crema::double_buffered_pipeline pipe{
              crema::vector_source<int>(std::move(records)),
              fill_on_host{uploader ? std::make_shared<crema::batch_uploader<crema::cuda_stream>>(0)
                                    : nullptr},
              {.batch_size = 64,
               .producers = 4,
               .threads = 4,
               .mode = crema::pipeline_mode::single_pass}};
          for (auto batch : pipe.consumer(0)) {
            const auto on_device = batch->device(compute);
            consume_on(on_device.data.data(), on_device.data.size(), sum, pulled,
                       compute.native_handle());
            batch.release_after(compute.record());
            ++pulled;
          }
        } catch (const std::exception& e) {
          return fmt::format("{}|{}|{}", cuda_code_of(e), pulled, crema::test::what_with_cause(e));
        }
        return fmt::format("none|{}", pulled);
      });
      if (!ran) break;
    }
  }

#if defined(CREMA_FAULT_TEST_NVJPEG)
  TEST_CASE(
      "a consumer kernel's fault stops an nvjpeg_batcher's pipeline, and its decoders go back") {
    const crema::test::image_folder folder("nvjpeg-fault");
    // Each step goes to the log as it starts, and a child that hangs prints its main thread's
    // stack there: on an H100 (2026-11-27) this case hung after the fault, where these say.
    (void)check_stops_on_fault([&] {
      skip_without_device();
      crema::cuda_stream compute;
      float* sum = nullptr;
      CREMA_CUDA_TRY(cudaMalloc(&sum, sizeof(float)));
      std::optional<crema::cuda::nvjpeg_batcher<float>> batcher(
          std::in_place,
          crema::image_transform_options{
              .geometry = crema::random_resized_crop{.height = 64, .width = 56}, .mirror = true},
          crema::cuda::nvjpeg_batcher_options{.decoders = 1});
      std::size_t pulled = 0;
      std::string ended;
      try {
        crema::double_buffered_pipeline pipe{
            crema::image_folder_source(folder.path()),
            *batcher,
            {.batch_size = 4, .producers = 4, .threads = 4, .mode = crema::pipeline_mode::repeat}};
        try {
          for (auto batch : pipe.consumer(0)) {
            const auto on_device = batch->device(compute);
            consume_on(on_device.data.data(), on_device.data.size(), sum, pulled,
                       compute.native_handle());
            batch.release_after(compute.record());
            if (++pulled == 200) break;
          }
          ended = fmt::format("none|{}", pulled);
        } catch (const std::exception& e) {
          ended = fmt::format("{}|{}|{}", cuda_code_of(e), pulled, crema::test::what_with_cause(e));
        }
        log_step(fmt::format("the pass ended ({}); destroying the pipeline", ended));
      } catch (const std::exception& e) {
        ended = fmt::format("{}|{}|{}", cuda_code_of(e), pulled, crema::test::what_with_cause(e));
      }
      // The decoder lent to a producer when the pipeline stopped is back in the pool.
      log_step("borrowing the decoder back");
      { const auto loan = batcher->decoders().borrow(0); }
      log_step("destroying the batcher and its decoders");
      batcher.reset();
      log_step("destroying the consumer's stream");
      return ended;
    });
  }
#endif
}
