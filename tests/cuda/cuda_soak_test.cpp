// The soak (tests/common/soak.hpp) over crema's real CUDA device batches, on the counting runtime
// (counting_runtime.hpp): pipelines of random shapes, uploads on the consumer's stream, each
// batch's own or an uploader, stopped, destroyed under their consumers or run to the end of their
// pass, over a source and a transform that throw now and then. Every pipeline must leave the
// runtime holding no more memory, streams or events than before it. 10^6 records by default,
// so that CI runs it; CREMA_SOAK_RECORDS for more.
#include <crema/memory/cuda/cuda_device_resource.hpp>
#include <crema/pipeline/cuda/device_batch.hpp>

#include "common/soak.hpp"
#include "counting_runtime.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <random>

namespace {

using namespace crema::test::soaking;
namespace counting = crema::test::counting_cuda;

// Every consumer's batches on the current device, as one GPU's solvers.
struct current_device {
  [[nodiscard]] crema::cuda_device_resource resource(std::size_t /*consumer*/) const { return {}; }
};

}  // namespace

TEST_CASE(
    "soak: pipelines of CUDA device batches stopped, destroyed and failing at random leave no "
    "memory, stream or event behind, and every whole pass is exact") {
  current_device device;
  std::size_t leaks = 0;
  soak(
      [&](std::mt19937_64& draw, ending how) {
        const auto before = counting::held();
        const run_result result = device_run<crema::cuda::device_batch<float>>(
            draw, how, [&](std::size_t) { return &device; });
        leaks += counting::held() == before ? 0 : 1;
        return result;
      },
      1'000'000);
  CHECK(leaks == 0);
}
