// The arithmetic crema-cuda-demo's kernels run (demo/mlp_math.hpp, one result per thread) gives
// on the host what mlp.hpp's loops give: the loss, every gradient element and the SGD step, bit
// for bit, on a random batch. Runs in every build, so the GPU demo's math is tested where there
// is no GPU. Prints "mlp_math: the same bits" and exits 0, or names the first difference and
// exits 1.
#include "mlp.hpp"
#include "mlp_math.hpp"
#include "train.hpp"

#include <fmt/core.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

namespace {

bool same_bits(float a, float b) {
  std::uint32_t x = 0;
  std::uint32_t y = 0;
  std::memcpy(&x, &a, sizeof x);
  std::memcpy(&y, &b, sizeof y);
  return x == y || (a == 0.0f && b == 0.0f);  // +0 and -0 are one value to every use here
}

}  // namespace

int main() {
  constexpr std::size_t inputs = 300;
  constexpr std::size_t hidden = 24;
  constexpr std::size_t classes = 10;
  constexpr std::size_t n = 7;
  const demo::mlp model(inputs, hidden, classes);
  const demo::math::layout layout{inputs, hidden, classes};

  std::vector<float> w(model.parameters());
  model.initialize(w, 3);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> pixel(-2.0f, 2.0f);
  std::uniform_real_distribution<float> bias(-0.1f, 0.1f);
  for (std::size_t k = layout.b2(); k < layout.w1(); ++k) w[k] = bias(rng);  // nonzero biases
  for (std::size_t k = layout.b1(); k < w.size(); ++k) w[k] = bias(rng);
  std::vector<float> x(n * inputs);
  for (float& v : x) v = pixel(rng);
  std::vector<float> labels(n);
  for (std::size_t b = 0; b < n; ++b) labels[b] = static_cast<float>((b * 3) % classes);

  // mlp.hpp's loops.
  std::vector<float> expected(model.parameters());
  demo::mlp::scratch scratch;
  const float expected_loss =
      model.gradients(w, x.data(), labels.data(), n, expected, scratch, [](std::size_t) {});

  // One result at a time, as the kernels compute them.
  std::vector<float> h(n * hidden);
  std::vector<float> ds(n * classes);
  std::vector<float> dh(n * hidden);
  std::vector<float> g(model.parameters());
  for (std::size_t b = 0; b < n; ++b) {
    for (std::size_t j = 0; j < hidden; ++j) {
      h[b * hidden + j] = demo::math::hidden_unit(w.data(), x.data(), b, j, layout);
    }
  }
  float loss = 0.0f;
  for (std::size_t b = 0; b < n; ++b) {
    loss += demo::math::score_gradient(w.data(), h.data(), labels.data(), b, n, ds.data(), layout);
  }
  loss *= 1.0f / static_cast<float>(n);  // mlp.hpp's mean: the sum times 1/n
  for (std::size_t k = 0; k < layout.w1(); ++k) {
    g[k] = demo::math::output_gradient(h.data(), ds.data(), n, k, layout);
  }
  for (std::size_t b = 0; b < n; ++b) {
    for (std::size_t j = 0; j < hidden; ++j) {
      dh[b * hidden + j] = demo::math::hidden_gradient(w.data(), h.data(), ds.data(), b, j, layout);
    }
  }
  for (std::size_t k = layout.w1(); k < g.size(); ++k) {
    g[k] = demo::math::input_gradient(x.data(), dh.data(), n, k - layout.w1(), layout);
  }

  int failures = 0;
  if (!same_bits(loss, expected_loss)) {
    fmt::print("mlp_math: loss {} against mlp.hpp's {}\n", loss, expected_loss);
    ++failures;
  }
  for (std::size_t k = 0; k < g.size() && failures < 5; ++k) {
    if (!same_bits(g[k], expected[k])) {
      fmt::print("mlp_math: gradient element {} is {} against mlp.hpp's {}\n", k, g[k],
                 expected[k]);
      ++failures;
    }
  }
  std::size_t active =
      0;  // the check means little unless the ReLU passes some units and not others
  for (const float unit : h) active += unit > 0.0f ? 1 : 0;
  if (active == 0 || active == h.size()) {
    fmt::print("mlp_math: {} of {} hidden units on; the batch tests too little\n", active,
               h.size());
    ++failures;
  }

  // The SGD step.
  std::vector<float> v(w.size(), 0.01f);
  std::vector<float> w_loop = w;
  std::vector<float> v_loop = v;
  demo::settings s;
  for (std::size_t k = 0; k < w.size(); ++k) {
    demo::math::sgd_step(w.data(), g.data(), v.data(), k, 0.01f, s.momentum, s.weight_decay);
  }
  demo::sgd_update(w_loop, expected, v_loop, 0.01f, s);
  for (std::size_t k = 0; k < w.size() && failures < 10; ++k) {
    if (!same_bits(w[k], w_loop[k]) || !same_bits(v[k], v_loop[k])) {
      fmt::print("mlp_math: the SGD step differs at parameter {}\n", k);
      ++failures;
    }
  }
  if (failures != 0) return 1;
  fmt::print("mlp_math: the same bits (loss {:.4f}, {} gradient elements, {} of {} units on)\n",
             loss, g.size(), active, h.size());
  return 0;
}
