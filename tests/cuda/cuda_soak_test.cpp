// The soak (tests/common/soak.hpp) over crema's real CUDA device batches, on the counting runtime
// (counting_runtime.hpp): pipelines of random shapes, uploads on the consumer's stream, each
// batch's own or an uploader, stopped, destroyed under their consumers or run to the end of their
// pass, over a source and a transform that throw now and then, and a runtime that fails now and
// then (one call of a kind, or every call from it on, as after a kernel's fault). Every pipeline
// must leave the runtime holding no more memory, streams or events than before it; a failing
// runtime must fail the pipeline or the batch it hit, never hang, crash or hand over a batch
// that is not what was written. 10^6 records by default, so that CI runs it;
// CREMA_SOAK_RECORDS for more.
#include <crema/memory/cuda/cuda_device_resource.hpp>
#include <crema/pipeline/cuda/device_batch.hpp>

#include "common/soak.hpp"
#include "counting_runtime.hpp"

#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <random>

namespace {

using namespace crema::test::soaking;
namespace counting = crema::test::counting_cuda;
using counting::call;

// The calls a feed of device batches makes while it runs, any of which a GPU may fail.
constexpr std::array failing_calls{call::memcpy_async,      call::event_record,
                                   call::stream_wait_event, call::event_synchronize,
                                   call::event_query,       call::allocate};

// Every consumer's batches on the current device, as one GPU's solvers.
struct current_device {
  [[nodiscard]] crema::cuda_device_resource resource(std::size_t /*consumer*/) const { return {}; }
};

}  // namespace

TEST_CASE(
    "soak: pipelines of CUDA device batches stopped, destroyed and failing at random, the runtime "
    "too, leave no memory, stream or event behind, and every whole pass is exact") {
  current_device device;
  std::size_t leaks = 0;
  std::size_t faulty = 0;
  std::uint64_t failed_calls = 0;
  soak(
      [&](std::mt19937_64& draw, ending how) {
        const bool fails = pick(draw, 0, 9) == 0;
        if (fails) {
          ++faulty;
          // Drawn one by one: the order a call's arguments are evaluated in is unspecified.
          const call kind = failing_calls.at(pick(draw, 0, failing_calls.size() - 1));
          const std::uint64_t after = pick(draw, 0, 200);
          const bool sticky = pick(draw, 0, 1) == 1;
          counting::fail_call(kind, after, cudaErrorLaunchFailure, sticky);
        }
        const auto before = counting::held();
        run_result result = device_run<crema::cuda::device_batch<float>>(
            draw, how, [&](std::size_t) { return &device; });
        leaks += counting::held() == before ? 0 : 1;
        if (fails) {
          failed_calls += counting::failed_calls();
          counting::heal();
          result.other_errors = 0;  // a consumer's own call may fail
        }
        return result;
      },
      1'000'000);
  MESSAGE(faulty << " pipelines on a failing runtime, " << failed_calls << " calls failed");
  CHECK(leaks == 0);
  CHECK(failed_calls > 0);
}
