#pragma once

// The demo model's arithmetic one result at a time: what one GPU thread of crema-cuda-demo
// computes (demo/cuda_solver.cuh launches a thread per result), written once for the device and
// for the host, where demo/mlp_math_check.cpp compares it with mlp.hpp's loops. Sums run in the
// order mlp.hpp's loops add, so on the host both give the same bits. The flat layout is mlp.hpp's:
//   [ W2: hidden x classes | b2: classes | W1: inputs x hidden | b1: hidden ]

#if defined(__CUDACC__)
#define DEMO_HOST_DEVICE __host__ __device__
#else
#define DEMO_HOST_DEVICE
#endif

#include <cmath>
#include <cstddef>

namespace demo::math {

// Classes a record's scores may have (they live in a thread's registers).
inline constexpr std::size_t max_classes = 16;

struct layout {
  std::size_t inputs = 0;
  std::size_t hidden = 0;
  std::size_t classes = 0;

  DEMO_HOST_DEVICE std::size_t b2() const { return hidden * classes; }
  DEMO_HOST_DEVICE std::size_t w1() const { return b2() + classes; }
  DEMO_HOST_DEVICE std::size_t b1() const { return w1() + inputs * hidden; }
};

// Hidden unit j of record b: max(0, b1[j] + sum_i x[b, i] W1[i, j]).
DEMO_HOST_DEVICE inline float hidden_unit(const float* w, const float* x, std::size_t b,
                                          std::size_t j, layout l) {
  const float* w1 = w + l.w1();
  const float* row = x + b * l.inputs;
  float sum = w[l.b1() + j];
  for (std::size_t i = 0; i < l.inputs; ++i) sum += row[i] * w1[i * l.hidden + j];
  return sum > 0.0f ? sum : 0.0f;
}

// Record b's class probabilities into p[0, classes): softmax(b2 + h[b] W2).
DEMO_HOST_DEVICE inline void probabilities(const float* w, const float* h, std::size_t b, float* p,
                                           layout l) {
  const float* row = h + b * l.hidden;
  for (std::size_t c = 0; c < l.classes; ++c) p[c] = w[l.b2() + c];
  for (std::size_t j = 0; j < l.hidden; ++j) {
    if (row[j] == 0.0f) continue;
    for (std::size_t c = 0; c < l.classes; ++c) p[c] += row[j] * w[j * l.classes + c];
  }
  float top = p[0];
  for (std::size_t c = 1; c < l.classes; ++c) top = p[c] > top ? p[c] : top;
  float total = 0.0f;
  for (std::size_t c = 0; c < l.classes; ++c) total += (p[c] = std::exp(p[c] - top));
  for (std::size_t c = 0; c < l.classes; ++c) p[c] /= total;
}

// Record b of n: its probabilities turned into the gradient of the mean cross-entropy by its
// scores, (p - one_hot(label)) / n, written to ds[b]; returns the record's loss.
DEMO_HOST_DEVICE inline float score_gradient(const float* w, const float* h, const float* labels,
                                             std::size_t b, std::size_t n, float* ds, layout l) {
  float p[max_classes];
  probabilities(w, h, b, p, l);
  const auto label = static_cast<std::size_t>(labels[b]);
  const float loss = -std::log(p[label] > 1e-30f ? p[label] : 1e-30f);
  p[label] -= 1.0f;
  const float per_record = 1.0f / static_cast<float>(n);
  for (std::size_t c = 0; c < l.classes; ++c) ds[b * l.classes + c] = p[c] * per_record;
  return loss;
}

// Element k of the output layer's gradient [dW2 | db2]: dW2[j, c] = sum_b h[b, j] ds[b, c],
// db2[c] = sum_b ds[b, c].
DEMO_HOST_DEVICE inline float output_gradient(const float* h, const float* ds, std::size_t n,
                                              std::size_t k, layout l) {
  float sum = 0.0f;
  if (k < l.b2()) {
    const std::size_t j = k / l.classes;
    const std::size_t c = k % l.classes;
    for (std::size_t b = 0; b < n; ++b) {
      const float unit = h[b * l.hidden + j];
      if (unit != 0.0f) sum += unit * ds[b * l.classes + c];
    }
  } else {
    for (std::size_t b = 0; b < n; ++b) sum += ds[b * l.classes + (k - l.b2())];
  }
  return sum;
}

// The gradient by hidden unit j of record b, through the ReLU: sum_c ds[b, c] W2[j, c] where the
// unit is on, else 0.
DEMO_HOST_DEVICE inline float hidden_gradient(const float* w, const float* h, const float* ds,
                                              std::size_t b, std::size_t j, layout l) {
  if (h[b * l.hidden + j] == 0.0f) return 0.0f;
  float sum = 0.0f;
  for (std::size_t c = 0; c < l.classes; ++c) sum += ds[b * l.classes + c] * w[j * l.classes + c];
  return sum;
}

// Element k of the hidden layer's gradient [dW1 | db1], counted from W1's start:
// dW1[i, j] = sum_b x[b, i] dh[b, j], db1[j] = sum_b dh[b, j].
DEMO_HOST_DEVICE inline float input_gradient(const float* x, const float* dh, std::size_t n,
                                             std::size_t k, layout l) {
  float sum = 0.0f;
  if (k < l.inputs * l.hidden) {
    const std::size_t i = k / l.hidden;
    const std::size_t j = k % l.hidden;
    for (std::size_t b = 0; b < n; ++b) sum += x[b * l.inputs + i] * dh[b * l.hidden + j];
  } else {
    for (std::size_t b = 0; b < n; ++b) sum += dh[b * l.hidden + (k - l.inputs * l.hidden)];
  }
  return sum;
}

// Caffe's SGD step for parameter k: v = momentum v - rate (g + decay w); w += v.
DEMO_HOST_DEVICE inline void sgd_step(float* w, const float* g, float* v, std::size_t k, float rate,
                                      float momentum, float decay) {
  v[k] = momentum * v[k] - rate * (g[k] + decay * w[k]);
  w[k] += v[k];
}

}  // namespace demo::math
