#pragma once

// crema-cuda-demo's solver: the demo's participant on a GPU. Its parameters, gradients and (on
// the root) momentum are crema::cuda::synced_buffers on its device; the batches reach it as CUDA
// device_batches uploaded by the pipeline's producers on this device's copy stream; its forward
// and backward passes and its SGD step are kernels on its compute stream, one thread per result,
// computing what demo/mlp_math.hpp says (tested on the host against mlp.hpp). Compiled by nvcc.

#include "mlp.hpp"
#include "mlp_math.hpp"
#include "train.hpp"

#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/cuda/synced_buffer.hpp>
#include <crema/pipeline/cuda/device_batch.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <numeric>
#include <span>
#include <stdexcept>
#include <utility>

namespace demo {

namespace kernels {

constexpr unsigned threads = 256;

inline unsigned blocks_for(std::size_t results) {
  return static_cast<unsigned>((results + threads - 1) / threads);
}

__global__ void hidden_units(const float* w, const float* x, std::size_t n, float* h,
                             math::layout l) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (k < n * l.hidden) h[k] = math::hidden_unit(w, x, k / l.hidden, k % l.hidden, l);
}

__global__ void score_gradients(const float* w, const float* h, const float* labels, std::size_t n,
                                float* ds, float* losses, math::layout l) {
  const std::size_t b = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (b < n) losses[b] = math::score_gradient(w, h, labels, b, n, ds, l);
}

__global__ void output_gradients(const float* h, const float* ds, std::size_t n, float* g,
                                 math::layout l) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (k < l.w1()) g[k] = math::output_gradient(h, ds, n, k, l);
}

__global__ void hidden_gradients(const float* w, const float* h, const float* ds, std::size_t n,
                                 float* dh, math::layout l) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (k < n * l.hidden) dh[k] = math::hidden_gradient(w, h, ds, k / l.hidden, k % l.hidden, l);
}

__global__ void input_gradients(const float* x, const float* dh, std::size_t n, float* g,
                                math::layout l) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (k < l.inputs * l.hidden + l.hidden) g[l.w1() + k] = math::input_gradient(x, dh, n, k, l);
}

__global__ void sgd(float* w, const float* g, float* v, std::size_t count, float rate,
                    float momentum, float decay) {
  const std::size_t k = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (k < count) math::sgd_step(w, g, v, k, rate, momentum, decay);
}

}  // namespace kernels

// What `make` returns, made with `device` current (a stream belongs to the device it is made on).
template <class Make>
auto on_device(int device, Make make) {
  crema::cuda::scoped_device on(device);
  return make();
}

class cuda_participant {
 public:
  // A solver on GPU `device` for `model`, taking batches of up to `batch` records.
  cuda_participant(int device, const mlp& model, std::size_t batch)
      : device_(device),
        layout_{model.inputs(), model.hidden(), model.classes()},
        compute_(on_device(device, [] { return crema::cuda_stream(); })),
        parameters_(model.parameters(), {}, crema::cuda_device_resource(device)),
        gradients_(model.parameters(), {}, crema::cuda_device_resource(device)),
        history_(model.parameters(), {}, crema::cuda_device_resource(device)),
        hidden_(batch * layout_.hidden, {}, crema::cuda_device_resource(device)),
        hidden_gradients_(batch * layout_.hidden, {}, crema::cuda_device_resource(device)),
        score_gradients_(batch * layout_.classes, {}, crema::cuda_device_resource(device)),
        losses_(batch, {}, crema::cuda_device_resource(device)) {
    if (layout_.classes > math::max_classes) {
      throw std::invalid_argument("cuda_participant: more classes than a thread's registers hold");
    }
  }

  // The root's first weights, written on the host; the first device read uploads them.
  std::span<float> host_parameters() { return parameters_.mutable_host(); }
  // The buffers on the device, for the collectives (the head moves there once).
  crema::device_span<float> device_parameters() { return parameters_.mutable_device(); }
  crema::device_span<float> device_gradients() { return gradients_.mutable_device(); }
  // The trained parameters, downloaded.
  std::span<const float> trained_parameters() const { return parameters_.host(); }

  // A batch on this GPU, made once per pipeline slot, with a copy stream of its own: the
  // producer that fills it shares no stream with the others.
  crema::cuda::device_batch<float> make_batch(std::size_t batch_size, crema::record_shape shape) {
    return crema::cuda::device_batch<float>(batch_size, shape, {},
                                            crema::cuda_device_resource(device_));
  }

  // As participant::compute_gradients, on the GPU: the compute stream waits for the batch's
  // upload (the host does not), each layer's bucket is reported once its kernels have finished
  // (the collectives read the gradients from their own streams), and the batch is not touched
  // after the return.
  // (A Batch is a crema::cuda::device_batch<float> or an nvjpeg_batcher's batch: `size()` and
  // `device(stream)`.)
  template <class Batch, class LayerDone>
  float compute_gradients(const Batch& batch, const mlp& model, LayerDone&& layer_done) {
    (void)model;
    crema::cuda::scoped_device on(device_);
    const std::size_t n = batch.size();
    const auto on_device = batch.device(compute_);  // compute_ waits for the one upload
    const float* x = on_device.data.data();
    const float* labels = on_device.labels.data();
    const float* w = parameters_.mutable_device().data();
    float* g = gradients_.mutable_device().data();
    float* h = hidden_.mutable_device().data();
    float* ds = score_gradients_.mutable_device().data();
    float* dh = hidden_gradients_.mutable_device().data();
    float* losses = losses_.mutable_device().data();
    const cudaStream_t stream = compute_.native_handle();
    kernels::hidden_units<<<kernels::blocks_for(n * layout_.hidden), kernels::threads, 0, stream>>>(
        w, x, n, h, layout_);
    kernels::score_gradients<<<kernels::blocks_for(n), kernels::threads, 0, stream>>>(
        w, h, labels, n, ds, losses, layout_);
    kernels::output_gradients<<<kernels::blocks_for(layout_.w1()), kernels::threads, 0, stream>>>(
        h, ds, n, g, layout_);
    CREMA_CUDA_TRY(cudaGetLastError());
    compute_.synchronize();
    layer_done(0);
    const std::size_t hidden_layer = layout_.inputs * layout_.hidden + layout_.hidden;
    kernels::
        hidden_gradients<<<kernels::blocks_for(n * layout_.hidden), kernels::threads, 0, stream>>>(
            w, h, ds, n, dh, layout_);
    kernels::input_gradients<<<kernels::blocks_for(hidden_layer), kernels::threads, 0, stream>>>(
        x, dh, n, g, layout_);
    CREMA_CUDA_TRY(cudaGetLastError());
    compute_.synchronize();
    layer_done(1);
    const auto record_losses = losses_.host();  // downloads the n losses
    const float total = std::accumulate(
        record_losses.begin(), record_losses.begin() + static_cast<std::ptrdiff_t>(n), 0.0f);
    return total * (1.0f / static_cast<float>(n));
  }

  // Caffe's SGD step on the GPU, finished before the return (the next step's broadcast reads
  // the parameters).
  void update(float rate, const settings& s) {
    crema::cuda::scoped_device on(device_);
    const std::size_t count = parameters_.size();
    kernels::sgd<<<kernels::blocks_for(count), kernels::threads, 0, compute_.native_handle()>>>(
        parameters_.mutable_device().data(), gradients_.mutable_device().data(),
        history_.mutable_device().data(), count, rate, s.momentum, s.weight_decay);
    CREMA_CUDA_TRY(cudaGetLastError());
    compute_.synchronize();
  }

 private:
  int device_;
  math::layout layout_;
  crema::cuda_stream compute_;
  crema::cuda::synced_buffer<float> parameters_;
  crema::cuda::synced_buffer<float> gradients_;
  crema::cuda::synced_buffer<float> history_;
  crema::cuda::synced_buffer<float> hidden_;
  crema::cuda::synced_buffer<float> hidden_gradients_;
  crema::cuda::synced_buffer<float> score_gradients_;
  crema::cuda::synced_buffer<float> losses_;
};

}  // namespace demo
