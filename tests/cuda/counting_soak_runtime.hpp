#pragma once

// The counting runtime (counting_runtime.hpp) as the CUDA soaks draw it for each pipeline
// (cuda_soak_test.cpp, nvjpeg_soak_test.cpp): one device or two, and in one pipeline of ten a call
// that fails, once or from then on, as after a kernel's fault; and what the pipeline left behind.

#include "common/soak.hpp"
#include "counting_runtime.hpp"

#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <random>

namespace crema::test::soaking {

/// The calls a feed of device batches makes while it runs, any of which a GPU may fail.
inline constexpr std::array feed_calls{
    counting_cuda::call::memcpy_async,      counting_cuda::call::event_record,
    counting_cuda::call::stream_wait_event, counting_cuda::call::event_synchronize,
    counting_cuda::call::event_query,       counting_cuda::call::allocate};

/// What the runtime's failures came to over a soak.
struct fault_tally {
  std::size_t faulty = 0;  ///< pipelines on a failing runtime
  std::uint64_t failed_calls = 0;
};

/// One pipeline's runtime, drawn: its devices (current, from construction to destruction), and
/// whether and how it fails, the call failing after 0 to `latest_failure` calls of its kind.
class soak_runtime {
 public:
  soak_runtime(std::mt19937_64& draw, std::uint64_t latest_failure)
      : devices_(static_cast<int>(pick(draw, 1, 2))), fails_(pick(draw, 0, 9) == 0) {
    if (fails_) {
      // Drawn one by one: the order a call's arguments are evaluated in is unspecified.
      const counting_cuda::call kind = feed_calls.at(pick(draw, 0, feed_calls.size() - 1));
      const std::uint64_t after = pick(draw, 0, latest_failure);
      sticky_ = pick(draw, 0, 1) == 1;
      counting_cuda::fail_call(kind, after, cudaErrorLaunchFailure, sticky_);
    }
  }
  soak_runtime(const soak_runtime&) = delete;
  soak_runtime& operator=(const soak_runtime&) = delete;
  ~soak_runtime() = default;

  [[nodiscard]] int devices() const noexcept { return devices_; }
  /// @return whether the runtime fails every call from its failure on
  [[nodiscard]] bool fails_for_good() const noexcept { return sticky_; }

  /// @brief After the pipeline: heals a failing runtime (its consumers' own errors then do not
  /// count), and notes whether the runtime holds more than before and saw a call that mixed
  /// devices.
  void after(run_result& result, fault_tally& tally) {
    if (fails_) {
      ++tally.faulty;
      tally.failed_calls += counting_cuda::failed_calls();
      counting_cuda::heal();
      result.other_errors = 0;
    }
    left_behind = counting_cuda::held() != held_;
    mixed_devices = counting_cuda::calls_across_devices() - across_;
  }

  bool left_behind = false;
  std::uint64_t mixed_devices = 0;

 private:
  int devices_;
  counting_cuda::devices_for_scope node_{devices_};
  bool fails_;
  bool sticky_ = false;
  counting_cuda::held_objects held_ = counting_cuda::held();
  std::uint64_t across_ = counting_cuda::calls_across_devices();
};

}  // namespace crema::test::soaking
