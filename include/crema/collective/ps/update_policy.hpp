#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

/// @file
/// How a parameter server changes its parameters by the average diff: the `update_policy` concept
/// and two models, Caffe's SGD with momentum and plain addition. Needs no MPI.

namespace crema::mpi {

/// @brief An update rule: `policy(parameters, mean_diff, version)` changes the parameters by the
/// average of the diffs that arrived for update `version` (0 for the first).
template <class Policy, class T>
concept update_policy = requires(Policy& policy, std::span<T> parameters, std::span<const T> diff,
                                 std::uint64_t version) {
  policy(parameters, diff, version);
};

/// @brief Stochastic gradient descent with momentum and weight decay, as Caffe's SGD solver:
/// `v = momentum * v + learning_rate * (g + weight_decay * w)`, `w -= v`. The diffs are gradients.
template <class T>
class sgd_momentum {
 public:
  /// @brief A step of 0.01, momentum 0.9, no weight decay.
  sgd_momentum() = default;
  /// @param learning_rate the step
  /// @param momentum      the share of the last step kept
  /// @param weight_decay  the L2 penalty's factor
  explicit sgd_momentum(T learning_rate, T momentum = T(0.9), T weight_decay = T(0))
      : learning_rate_(learning_rate), momentum_(momentum), weight_decay_(weight_decay) {}

  void operator()(std::span<T> parameters, std::span<const T> gradient, std::uint64_t) {
    if (velocity_.size() != parameters.size()) velocity_.assign(parameters.size(), T(0));
    for (std::size_t i = 0; i < parameters.size(); ++i) {
      velocity_[i] =
          momentum_ * velocity_[i] + learning_rate_ * (gradient[i] + weight_decay_ * parameters[i]);
      parameters[i] -= velocity_[i];
    }
  }

 private:
  T learning_rate_ = T(0.01);
  T momentum_ = T(0.9);
  T weight_decay_ = T(0);
  std::vector<T> velocity_;
};

/// @brief The diffs are changes of the parameters (a client's own optimizer stepped): the
/// average is added.
struct add_diff {
  template <class T>
  void operator()(std::span<T> parameters, std::span<const T> diff, std::uint64_t) const {
    for (std::size_t i = 0; i < parameters.size(); ++i) parameters[i] += diff[i];
  }
};

static_assert(update_policy<sgd_momentum<float>, float>);
static_assert(update_policy<add_diff, double>);

}  // namespace crema::mpi
