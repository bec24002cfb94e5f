#pragma once

#include <crema/collective/cuda/cuda_p2p_reducer.hpp>
#include <crema/collective/cuda/elementwise.cuh>
#include <crema/collective/reduction.hpp>
#include <crema/collective/tree_collective.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>

namespace crema::cuda {

/// @brief The peer reducer's element-wise work as Thrust transforms on the stream.
struct thrust_elementwise {
  template <class T>
  static void add_into(cudaStream_t stream, T* accumulator, const T* addend, std::size_t count) {
    detail::add_into(thrust::cuda::par.on(stream), accumulator, addend, count);
  }
  template <class T, class Scale>
  static void scale_into(cudaStream_t stream, T* data, std::size_t count, Scale scale) {
    detail::scale_into(thrust::cuda::par.on(stream), data, count, scale);
  }
};

/// @brief The CUDA peer-copy model of `tree_collective` (`basic_cuda_p2p_reducer`), its
/// element-wise work done by Thrust. Compiled with nvcc.
template <reducible T>
using cuda_p2p_reducer = basic_cuda_p2p_reducer<T, thrust_elementwise>;

static_assert(tree_collective<cuda_p2p_reducer<float>>);

}  // namespace crema::cuda
