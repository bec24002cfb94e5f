#pragma once

// A pipeline's consumers as a node's solvers run them, for tests linked with the counting
// runtime (counting_runtime.hpp) set to several devices: consumer i on a thread of its own with
// device i current.

#include "common/pipeline_failure.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace crema::test {

/// @brief Runs `consume(device, pipe.consumer(device))` for consumers 0 to `devices` - 1, each on
/// a thread of its own with that device current (consumer 0 on the calling thread, which is left
/// on device 0). An error stops the pipeline, as the others' batches would wait for its turn.
/// @return each consumer's error, with its causes ("" where none)
template <class Pipeline, class Consume>
std::vector<std::string> consume_on_devices(Pipeline& pipe, int devices, Consume consume) {
  std::vector<std::string> errors(static_cast<std::size_t>(devices));
  const auto run = [&](int device) {
    try {
      if (cudaSetDevice(device) != cudaSuccess) {
        throw std::runtime_error("cannot make device " + std::to_string(device) + " current");
      }
      consume(device, pipe.consumer(static_cast<std::size_t>(device)));
    } catch (const std::exception& e) {
      errors[static_cast<std::size_t>(device)] = what_with_cause(e);
      pipe.stop();
    }
  };
  std::vector<std::thread> others;
  for (int device = 1; device < devices; ++device) others.emplace_back(run, device);
  run(0);
  for (std::thread& other : others) other.join();
  return errors;
}

/// @return whether `pointer` is device memory of `device`
inline bool in_memory_of(int device, const void* pointer) {
  cudaPointerAttributes where{};
  return cudaPointerGetAttributes(&where, pointer) == cudaSuccess &&
         where.type == cudaMemoryTypeDevice && where.device == device;
}

}  // namespace crema::test
