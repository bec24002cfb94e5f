#pragma once

#include <crema/core/detail/host_device.hpp>

#include <thrust/execution_policy.h>
#include <thrust/functional.h>
#include <thrust/transform.h>

#include <cstddef>

/// @file
/// The element-wise work of the CUDA reducer, through Thrust and an execution policy: on the
/// device `thrust::cuda::par.on(stream)`; in a CPU test `thrust::cpp::par` (built with g++ and
/// THRUST_DEVICE_SYSTEM_CPP), so the same code is checked without a GPU.

namespace crema::cuda::detail {

template <class T, class Scale>
struct times {
  Scale scale;
  CREMA_HOST_DEVICE T operator()(const T& value) const { return value * scale; }
};

/// `accumulator[i] = accumulator[i] + addend[i]` for i < count.
template <class Policy, class T>
void add_into(Policy&& policy, T* accumulator, const T* addend, std::size_t count) {
  thrust::transform(policy, accumulator, accumulator + count, addend, accumulator,
                    thrust::plus<T>());
}

/// `data[i] = data[i] * scale` for i < count.
template <class Policy, class T, class Scale>
void scale_into(Policy&& policy, T* data, std::size_t count, Scale scale) {
  thrust::transform(policy, data, data + count, data, times<T, Scale>{scale});
}

}  // namespace crema::cuda::detail
