// The CUDA device_batch in a pipeline: pinned host memory filled by producers, uploaded on a
// stream of the consumer's device, read by the consumer's stream after cudaStreamWaitEvent, and
// the slot released after the consumer's work. Built with the host compiler against the CUDA
// runtime; runs where there is a device, else reports itself skipped.
#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/pipeline/cuda/device_batch.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>

#include "common/cuda_skip.hpp"
#include "common/watchdog.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <vector>

namespace {

using namespace std::chrono_literals;
using batch_type = crema::cuda::device_batch<float>;
constexpr crema::record_shape shape{3, 8, 8};

struct fill_on_host {
  using batch_type = ::batch_type;
  std::shared_ptr<crema::cuda_stream> uploads;

  batch_type make_batch(const crema::batch_context& where) const {
    return uploads ? batch_type(where.batch_size, shape, uploads)
                   : batch_type(where.batch_size, shape);  // a stream of its own
  }
  void operator()(const int& record, batch_type& batch, const crema::sample_context& sample) const {
    const auto pixels = batch.record(sample.index);
    std::fill(pixels.begin(), pixels.end(), static_cast<float>(record));
    batch.set_label(sample.index, static_cast<float>(record));
  }
};

}  // namespace

// Every member of the CUDA batch compiles.
template class crema::device_batch<float, crema::host_pinned_resource, crema::cuda_device_resource>;

TEST_SUITE("cuda device_batch") {
  TEST_CASE(
      "a pipeline of CUDA device batches delivers every record to the device, uploaded on "
      "the producers' side") {
    if (crema::test::skip_without_cuda_device()) return;
    crema::test::watchdog guard(60s, "cuda device batches");
    std::vector<int> records(300);
    for (int i = 0; i < 300; ++i) records[static_cast<std::size_t>(i)] = i;
    for (const bool shared : {true, false}) {  // one upload stream for all, or one each
      CAPTURE(shared);
      crema::cuda_stream compute;
      crema::double_buffered_pipeline pipe{
          crema::vector_source<int>(records),
          fill_on_host{shared ? std::make_shared<crema::cuda_stream>() : nullptr},
          {.batch_size = 16,
           .prefetch = 3,
           .producers = 2,
           .threads = 2,
           .mode = crema::pipeline_mode::single_pass,
           .ordered = true}};
      std::vector<float> labels;
      std::vector<float> pixels(16 * shape.elements());
      for (auto batch : pipe.consumer(0)) {
        const auto on_device = batch->device(compute);  // compute waits for the upload
        const auto label_span = on_device.labels;
        std::vector<float> these(batch->size());
        CREMA_CUDA_TRY(cudaMemcpyAsync(pixels.data(), on_device.data.data(),
                                       batch->size() * shape.elements() * sizeof(float),
                                       cudaMemcpyDeviceToHost, compute.native_handle()));
        CREMA_CUDA_TRY(cudaMemcpyAsync(these.data(), label_span.data(),
                                       batch->size() * sizeof(float), cudaMemcpyDeviceToHost,
                                       compute.native_handle()));
        compute.synchronize();
        for (std::size_t i = 0; i < batch->size(); ++i) {
          const float* record = pixels.data() + i * shape.elements();
          CHECK(std::all_of(record, record + shape.elements(),
                            [&](float v) { return v == these[i]; }));
        }
        labels.insert(labels.end(), these.begin(), these.end());
        batch.release_after(compute.record());
      }
      REQUIRE(labels.size() == 300);
      for (int i = 0; i < 300; ++i)
        CHECK(labels[static_cast<std::size_t>(i)] == static_cast<float>(i));
    }
  }
}
