#pragma once

// The demo's model: a two-layer perceptron (inputs -> hidden ReLU units -> class scores ->
// softmax), its forward and backward passes written as loops over one batch, the way a CPU
// engine's kernels would be. Parameters and gradients live in one flat buffer each, laid out in
// the order the backward pass finishes them, so that each layer is a gradient bucket that can
// travel while the layers below are still being computed:
//   [ W2: hidden x classes | b2: classes | W1: inputs x hidden | b1: hidden ]

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <random>
#include <span>
#include <vector>

namespace demo {

class mlp {
 public:
  mlp(std::size_t inputs, std::size_t hidden, std::size_t classes)
      : inputs_(inputs), hidden_(hidden), classes_(classes) {}

  [[nodiscard]] std::size_t inputs() const noexcept { return inputs_; }
  [[nodiscard]] std::size_t hidden() const noexcept { return hidden_; }
  [[nodiscard]] std::size_t classes() const noexcept { return classes_; }
  [[nodiscard]] std::size_t parameters() const noexcept {
    return layer_sizes()[0] + layer_sizes()[1];
  }
  // Elements per layer in the flat buffer: the output layer's first, as the backward pass
  // finishes them; the gradient buckets.
  [[nodiscard]] std::array<std::size_t, 2> layer_sizes() const noexcept {
    return {hidden_ * classes_ + classes_, inputs_ * hidden_ + hidden_};
  }

  // He initialization for the weights, zero biases.
  void initialize(std::span<float> w, unsigned seed) const {
    std::mt19937 rng(seed);
    std::normal_distribution<float> hidden_init(0.0f,
                                                std::sqrt(2.0f / static_cast<float>(inputs_)));
    std::normal_distribution<float> output_init(0.0f,
                                                std::sqrt(2.0f / static_cast<float>(hidden_)));
    std::ranges::fill(w, 0.0f);
    for (float& v : w2(w)) v = output_init(rng);
    for (float& v : w1(w)) v = hidden_init(rng);
  }

  // Scratch for one batch: made once per participant, reused.
  struct scratch {
    std::vector<float> hidden;  // [n, hidden], after the ReLU
    std::vector<float> scores;  // [n, classes], then probabilities, then their gradients
    std::vector<float> hidden_gradient;
  };

  // The forward pass of `n` records of `x` ([n, inputs]): leaves class probabilities in
  // s.scores and returns nothing.
  void forward(std::span<const float> w, const float* x, std::size_t n, scratch& s) const {
    s.hidden.resize(n * hidden_);
    s.scores.resize(n * classes_);
    const auto weights1 = w1(w), bias1 = b1(w), weights2 = w2(w), bias2 = b2(w);
    for (std::size_t b = 0; b < n; ++b) {
      std::ranges::copy(bias1, s.hidden.begin() + static_cast<std::ptrdiff_t>(b * hidden_));
    }
    // Row by row of W1, so the 2 MB matrix is read once per batch, not once per record.
    for (std::size_t i = 0; i < inputs_; ++i) {
      const float* row = weights1.data() + i * hidden_;
      for (std::size_t b = 0; b < n; ++b) {
        axpy(x[b * inputs_ + i], row, s.hidden.data() + b * hidden_, hidden_);
      }
    }
    for (float& h : s.hidden) h = std::max(h, 0.0f);
    for (std::size_t b = 0; b < n; ++b) {
      float* scores = s.scores.data() + b * classes_;
      std::ranges::copy(bias2, scores);
      const float* h = s.hidden.data() + b * hidden_;
      for (std::size_t j = 0; j < hidden_; ++j) {
        if (h[j] != 0.0f) axpy(h[j], weights2.data() + j * classes_, scores, classes_);
      }
      softmax(scores);
    }
  }

  // Forward and backward over `n` records with their labels: writes the gradient of the mean
  // cross-entropy into `g`, calling `layer_done(l)` as soon as layer l's part of it (bucket l)
  // is final. Returns the mean loss.
  template <class LayerDone>
  float gradients(std::span<const float> w, const float* x, const float* labels, std::size_t n,
                  std::span<float> g, scratch& s, LayerDone&& layer_done) const {
    forward(w, x, n, s);
    const float per_record = 1.0f / static_cast<float>(n);
    float loss = 0.0f;
    for (std::size_t b = 0; b < n; ++b) {
      float* p = s.scores.data() + b * classes_;
      const auto label = static_cast<std::size_t>(labels[b]);
      loss -= std::log(std::max(p[label], 1e-30f));
      p[label] -= 1.0f;
      for (std::size_t c = 0; c < classes_; ++c) p[c] *= per_record;  // d loss / d score
    }
    // The output layer: dW2 = h^T ds, db2 = sum ds; and dh = ds W2^T through the ReLU.
    const auto weights2 = w2(w);
    const auto gw2 = w2(g), gb2 = b2(g);
    std::ranges::fill(gw2, 0.0f);
    std::ranges::fill(gb2, 0.0f);
    s.hidden_gradient.assign(n * hidden_, 0.0f);
    for (std::size_t b = 0; b < n; ++b) {
      const float* ds = s.scores.data() + b * classes_;
      const float* h = s.hidden.data() + b * hidden_;
      float* dh = s.hidden_gradient.data() + b * hidden_;
      for (std::size_t j = 0; j < hidden_; ++j) {
        if (h[j] == 0.0f) continue;  // the ReLU passes nothing back, and adds nothing to dW2
        axpy(h[j], ds, gw2.data() + j * classes_, classes_);
        float sum = 0.0f;
        for (std::size_t c = 0; c < classes_; ++c) sum += ds[c] * weights2[j * classes_ + c];
        dh[j] = sum;
      }
      axpy(1.0f, ds, gb2.data(), classes_);
    }
    layer_done(0);
    // The hidden layer: dW1 = x^T dh, db1 = sum dh.
    const auto gw1 = w1(g), gb1 = b1(g);
    for (std::size_t i = 0; i < inputs_; ++i) {
      float* row = gw1.data() + i * hidden_;
      std::fill(row, row + hidden_, 0.0f);
      for (std::size_t b = 0; b < n; ++b) {
        axpy(x[b * inputs_ + i], s.hidden_gradient.data() + b * hidden_, row, hidden_);
      }
    }
    std::ranges::fill(gb1, 0.0f);
    for (std::size_t b = 0; b < n; ++b) {
      axpy(1.0f, s.hidden_gradient.data() + b * hidden_, gb1.data(), hidden_);
    }
    layer_done(1);
    return loss * per_record;
  }

  // How many of `n` records the model classifies right (its most probable class is the label).
  std::size_t count_right(std::span<const float> w, const float* x, const float* labels,
                          std::size_t n, scratch& s) const {
    forward(w, x, n, s);
    std::size_t right = 0;
    for (std::size_t b = 0; b < n; ++b) {
      const float* p = s.scores.data() + b * classes_;
      const auto best = static_cast<std::size_t>(std::max_element(p, p + classes_) - p);
      right += best == static_cast<std::size_t>(labels[b]) ? 1 : 0;
    }
    return right;
  }

 private:
  static void axpy(float a, const float* x, float* y, std::size_t n) {
    for (std::size_t k = 0; k < n; ++k) y[k] += a * x[k];
  }
  void softmax(float* scores) const {
    const float top = *std::max_element(scores, scores + classes_);
    float total = 0.0f;
    for (std::size_t c = 0; c < classes_; ++c) total += (scores[c] = std::exp(scores[c] - top));
    for (std::size_t c = 0; c < classes_; ++c) scores[c] /= total;
  }

  template <class Span>
  Span w2(Span all) const {
    return all.subspan(0, hidden_ * classes_);
  }
  template <class Span>
  Span b2(Span all) const {
    return all.subspan(hidden_ * classes_, classes_);
  }
  template <class Span>
  Span w1(Span all) const {
    return all.subspan(layer_sizes()[0], inputs_ * hidden_);
  }
  template <class Span>
  Span b1(Span all) const {
    return all.subspan(layer_sizes()[0] + inputs_ * hidden_, hidden_);
  }

  std::size_t inputs_;
  std::size_t hidden_;
  std::size_t classes_;
};

}  // namespace demo
