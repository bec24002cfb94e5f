#pragma once

// The demo's data-parallel training, the same code for participants on threads of one process
// (crema-demo) and on the ranks of an MPI job (crema-mpi-train), as Caffe's P2PSync ran one
// solver per GPU:
// - every participant is a solver with its own (emulated) device, holding its parameters,
//   gradients and, on the root, the momentum, in synced_buffers that live on that device;
// - one pipeline per process reads the Caffe LMDB and deals batches to its participants in turn;
//   its producers decode, crop, mirror, subtract the mean and scale into device_batches on the
//   consumer's device (caffe_batcher), so a participant only reads a batch that is there;
// - p2p_sync broadcasts the root's parameters at each step's start and sums the gradients into
//   the root, a layer at a time: the output layer's bucket travels while the backward pass
//   computes the hidden layer's gradients;
// - the root applies Caffe's SGD with momentum and weight decay, and draws the progress bar.

#include "mlp.hpp"
#include "progress.hpp"
#include "shapes.hpp"

#include <crema/crema.hpp>
#include <crema/io/caffe/caffe_batcher.hpp>
#include <crema/io/caffe/caffe_transform.hpp>
#include <crema/io/lmdb/lmdb_source.hpp>
#include <crema/pipeline/host_batch.hpp>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace demo {

struct settings {
  std::size_t participants = 2;  // solvers in all: threads here, or over every rank of a job
  std::size_t batch = 32;        // records per participant and step
  std::size_t steps = 4000;
  std::size_t hidden = 128;
  float learning_rate = 0.01f;  // falls linearly to 0 over the run (Caffe's "poly", power 1)
  float momentum = 0.9f;
  float weight_decay = 5e-4f;
  std::uint64_t seed = 7;
  int train_records = 12000;
  int test_records = 2000;
};

inline constexpr crema::record_shape stored_shape{channels, side, side};
inline constexpr std::size_t crop = 28;

// Caffe's TransformationParameter for this data: crop 28 (at random while training, the centre
// when testing), mirror while training, mean 128, scale 1/64.
inline crema::caffe_transform transform_for(bool training) {
  return crema::caffe_transform({.crop_size = crop,
                                 .mirror = training,
                                 .training = training,
                                 .scale = 1.0f / 64.0f,
                                 .mean_values = {128.0f}});
}

inline mlp model_for(const settings& s) { return mlp(channels * crop * crop, s.hidden, classes); }

// A solver on its own emulated device: parameters, gradients and momentum in synced_buffers there.
class participant {
 public:
  participant(int device, std::size_t parameters)
      : device_(device),
        uploads_(std::make_shared<crema::emulated_stream>()),
        parameters_(parameters, {}, crema::emulated_device_resource{device_}),
        gradients_(parameters, {}, crema::emulated_device_resource{device_}),
        history_(parameters, {}, crema::emulated_device_resource{device_}) {}

  // The root's first weights, written on the host; the first device() read uploads them.
  std::span<float> host_parameters() { return parameters_.mutable_host(); }

  // The buffers on the device, where the collectives and the solver work on them from now on
  // (the head moves there once; nothing goes back to the host until the test).
  std::span<float> device_parameters() { return as_span(parameters_.mutable_device()); }
  std::span<float> device_gradients() { return as_span(gradients_.mutable_device()); }
  std::span<float> device_history() { return as_span(history_.mutable_device()); }

  // The trained parameters, downloaded.
  std::span<const float> trained_parameters() const { return parameters_.host(); }

  // One step's gradients of the mean loss over `batch`, into the device gradients, calling
  // `layer_done(l)` as soon as layer l's bucket is final; returns the loss.
  template <class LayerDone>
  float compute_gradients(const crema::device_batch<float>& batch, const mlp& model,
                          LayerDone&& layer_done) {
    const auto on_device = batch.device();  // uploaded by a producer; waits if still going
    return model.gradients(device_parameters(), on_device.data.data(), on_device.labels.data(),
                           batch.size(), device_gradients(), scratch_,
                           std::forward<LayerDone>(layer_done));
  }
  // Caffe's SGD step with the gradients in this solver's (the root's) buffers.
  void update(float rate, const settings& s);

  // A batch on this device, made once per pipeline slot; the producers' uploads go on this
  // device's copy stream.
  crema::device_batch<float> make_batch(std::size_t batch_size, crema::record_shape shape) {
    return crema::device_batch<float>(batch_size, shape, uploads_, {},
                                      crema::emulated_device_resource{device_});
  }

  [[nodiscard]] const crema::emulated_device& device() const noexcept { return device_; }

 private:
  static std::span<float> as_span(crema::device_span<float> on_device) {
    return {on_device.data(), on_device.size()};  // emulated device memory is the host's
  }

  crema::emulated_device device_;
  std::shared_ptr<crema::emulated_stream> uploads_;
  crema::synced_buffer<float> parameters_;
  crema::synced_buffer<float> gradients_;
  crema::synced_buffer<float> history_;
  mlp::scratch scratch_;
};

using participants = std::vector<std::unique_ptr<participant>>;

// `count` solvers on devices first, first + 1, ...; the root's (if among them) parameters set
// to the model's first weights on the host (`device_spans` then moves every buffer to its device).
inline participants make_participants(const mlp& model, std::size_t count, std::size_t first,
                                      std::size_t root) {
  participants made;
  for (std::size_t p = first; p < first + count; ++p) {
    made.push_back(std::make_unique<participant>(static_cast<int>(p), model.parameters()));
    if (p == root) model.initialize(made.back()->host_parameters(), 1);
  }
  return made;
}

// Each solver's parameters (or gradients) on its device, for the collectives.
inline std::vector<std::span<float>> device_spans(participants& solvers,
                                                  std::span<float> (participant::*which)()) {
  std::vector<std::span<float>> spans;
  for (auto& solver : solvers) spans.push_back(((*solver).*which)());
  return spans;
}

// p2p_sync's options: one gradient bucket per layer.
inline crema::p2p_sync_options sync_options(const mlp& model) {
  const auto layers = model.layer_sizes();
  return {.bucket_sizes = {layers.begin(), layers.end()}};
}

// The line that says what is trained.
inline void print_model(const mlp& model, const settings& s) {
  fmt::print(
      "model: {} -> {} ReLU -> {} softmax, {} parameters, one gradient bucket per layer; "
      "{} steps of {} x {} images, SGD with momentum\n",
      model.inputs(), s.hidden, classes, model.parameters(), s.steps, s.participants, s.batch);
}

// The pipeline's batch transform: Caffe's data layer into this process's participants' devices
// (emulated ones, or GPUs).
template <class Participant>
auto batcher_for(std::vector<std::unique_ptr<Participant>>& local) {
  auto make = [&local](const crema::batch_context& where, crema::record_shape shape) {
    return local.at(where.consumer)->make_batch(where.batch_size, shape);
  };
  return crema::caffe_batcher(stored_shape, transform_for(true), make);
}

inline crema::pipeline_options pipeline_options_for(const settings& s, std::size_t consumers) {
  return {.batch_size = s.batch,
          .prefetch = 4,
          .producers = 2,
          .threads = 1,
          .consumers = consumers,
          .seed = s.seed};
}

// Caffe's SGD step with momentum and weight decay: v = m v - lr (g + d w); w += v.
inline void sgd_update(std::span<float> w, std::span<const float> g, std::span<float> v, float rate,
                       const settings& s) {
  for (std::size_t i = 0; i < w.size(); ++i) {
    v[i] = s.momentum * v[i] - rate * (g[i] + s.weight_decay * w[i]);
    w[i] += v[i];
  }
}

inline void participant::update(float rate, const settings& s) {
  sgd_update(device_parameters(), device_gradients(), device_history(), rate, s);
}

// Trains the participants `local` (global numbers first, first + 1, ...) for s.steps steps on
// batches from `pipe`, one thread each; `bar` (the root's process only) shows the progress. A
// participant that fails aborts the sync, so the others stop too; the first failure is thrown.
// A Participant is `participant` here, on an emulated device, or `cuda_participant` on a GPU
// (demo/cuda_solver.cuh): each computes its gradients and its SGD step where its buffers are.
template <class Sync, class Pipeline, class Participant>
void train(Sync& sync, Pipeline& pipe, std::vector<std::unique_ptr<Participant>>& local,
           std::size_t first, const mlp& model, const settings& s, progress_bar* bar) {
  std::vector<std::atomic<float>> losses(local.size());
  std::mutex failure_mutex;
  std::exception_ptr failure;
  auto solve = [&](std::size_t i) {
    const std::size_t me = first + i;
    const bool root = me == sync.root();
    Participant& mine = *local[i];
    auto consumer = pipe.consumer(i);
    const auto bucket_done = [&](std::size_t layer) {
      if (layer + 1 < sync.buckets()) sync.on_bucket_ready(me, layer);  // the last: below
    };
    for (std::size_t step = 1; step <= s.steps; ++step) {
      sync.on_start(me);  // the root's parameters arrive in this solver's
      {
        const auto batch = consumer.pull();
        losses[i].store(mine.compute_gradients(*batch, model, bucket_done),
                        std::memory_order_relaxed);
      }                             // the slot goes back to the producers
      sync.on_gradients_ready(me);  // the root returns with the average of every gradient
      if (!root) continue;
      const float done = static_cast<float>(step - 1) / static_cast<float>(s.steps);
      mine.update(s.learning_rate * (1.0f - done), s);
      if (bar != nullptr) {
        float loss = 0.0f;
        for (const auto& l : losses) loss += l.load(std::memory_order_relaxed);
        bar->update(step, loss / static_cast<float>(local.size()), [&](double seconds) {
          const auto waited = std::chrono::duration<double>(pipe.stats().consumer_wait).count();
          return waited / (seconds * static_cast<double>(local.size()));
        });
      }
    }
  };
  {
    std::vector<std::jthread> threads;
    for (std::size_t i = 0; i < local.size(); ++i) {
      threads.emplace_back([&, i] {
        try {
          solve(i);
        } catch (const std::exception& e) {
          {
            std::scoped_lock lock(failure_mutex);
            if (!failure) failure = std::current_exception();
          }
          sync.abort(first + i, e.what());
        }
      });
    }
  }
  if (failure) std::rethrow_exception(failure);
}

struct training_run {
  double seconds = 0;
  crema::pipeline_stats pipeline;
};

// Trains all of this process's `solvers` (participants 0, 1, ...) on the database `train_db`
// through one pipeline that deals its batches to them, with a progress bar in `style`.
template <class Sync, class Participant>
training_run train_on(const std::filesystem::path& train_db, Sync& sync,
                      std::vector<std::unique_ptr<Participant>>& solvers, const mlp& model,
                      const settings& s, progress_style style) {
  crema::double_buffered_pipeline pipe{
      crema::lmdb_source(train_db, {.permute = true, .seed = s.seed}), batcher_for(solvers),
      pipeline_options_for(s, solvers.size())};
  progress_bar bar(s.steps, solvers.size() * s.batch, style);
  train(sync, pipe, solvers, 0, model, s, &bar);
  pipe.stop();
  return {bar.seconds(), pipe.stats()};
}

// The fraction of the test database that `w` classifies right, read by a single-pass pipeline
// that crops the centre and never mirrors.
inline double test_accuracy(const std::filesystem::path& test, std::span<const float> w,
                            const mlp& model) {
  crema::caffe_batcher batcher(stored_shape, transform_for(false), crema::make_host_batch<float>{});
  crema::double_buffered_pipeline pipe{
      crema::lmdb_source(test),
      batcher,
      {.batch_size = 100, .producers = 2, .threads = 1, .mode = crema::pipeline_mode::single_pass}};
  mlp::scratch scratch;
  std::size_t right = 0;
  std::size_t seen = 0;
  for (auto batch : pipe.consumer(0)) {
    right += model.count_right(w, batch->data.data(), batch->labels.data(), batch->size(), scratch);
    seen += batch->size();
  }
  return static_cast<double>(right) / static_cast<double>(seen);
}

}  // namespace demo
