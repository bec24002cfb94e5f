// The nvJPEG soak (nvjpeg_soak.hpp) on the fake nvJPEG and the counting runtime: pipelines of
// random shapes over image files or encoded Datums, of float or 8-bit samples, with decoders lent
// among the producers, a CPU share or none, the engine or none, one device or two, stopped,
// destroyed under their consumers or run to the end of their pass, over a source and a transform
// that throw now and then, and a runtime that fails now and then. Every sample delivered must be
// its image's, byte for byte (the fake decodes with the CPU path's decoder), every whole pass
// exact, every pipeline must end, and one that met no fault for good must leave no memory, stream,
// event or nvJPEG object behind. 1,000 records and at least 60 pipelines by default, so that CI
// runs it; CREMA_SOAK_RECORDS for more.
#include <crema/io/nvjpeg/nvjpeg_batcher.hpp>

#include "common/soak.hpp"
#include "common/watchdog.hpp"
#include "counting_soak_runtime.hpp"
#include "fake_nvjpeg.hpp"
#include "host_nvjpeg_decoder.hpp"
#include "nvjpeg_soak.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace {

using namespace crema::test::soaking;
using namespace crema::test::nvjpeg_soaking;
namespace fake = crema::test::fake_nvjpeg;
template <class T>
using batcher = crema::cuda::basic_nvjpeg_batcher<T, crema::test::host_nvjpeg_decoder>;

// The fake decodes with the CPU path's decoder: the same bytes.
struct byte_for_byte {
  template <class T>
  bool operator()(const T* expected, const T* got, std::size_t elements) const {
    return std::equal(got, got + elements, expected);
  }
};

}  // namespace

TEST_CASE(
    "soak: pipelines of nvJPEG-decoded batches of files or Datums stopped, destroyed and failing "
    "at random, the runtime too, deliver each image's sample, leave nothing behind, and every "
    "whole pass is exact") {
  const soak_images images;
  const run_limits limits{.records = 64, .batch_size = 8, .stop_after = 6};
  std::size_t leaks = 0;
  fault_tally faults;
  std::uint64_t mixed_devices = 0;
  std::size_t left_on_purpose = 0;
  feed_counts counts;
  soak(
      [&](std::mt19937_64& draw, ending how) {
        const crema::test::watchdog guard(std::chrono::seconds(60), "an nvJPEG soak's pipeline");
        const fake::scoped_behaviour gpu({.hardware_engine = pick(draw, 0, 3) != 0});
        const crema::cuda::nvjpeg_batcher_options feed = draw_feed(draw);
        soak_runtime runtime(draw, 100);
        const std::size_t objects = fake::live_objects();
        run_result result = feed_run<batcher>(
            draw, how, images, limits, feed,
            [&](std::size_t consumers) {
              return consumers == 2 && runtime.devices() == 2 ? std::vector<int>{0, 1}
                                                              : std::vector<int>{};
            },
            byte_for_byte{}, counts);
        runtime.after(result, faults);
        leaks += runtime.left_behind ? 1 : 0;
        mixed_devices += runtime.mixed_devices;
        if (runtime.fails_for_good()) {
          // After a fault for good, the decoders' nvJPEG objects are left on purpose (destroying
          // them may wait on the faulted GPU); a process would have ended.
          left_on_purpose += fake::reclaim_objects();
        } else {
          leaks += fake::live_objects() > objects ? 1 : 0;
        }
        return result;
      },
      1'000);
  MESSAGE(faults.faulty << " pipelines on a failing runtime, " << faults.failed_calls
                        << " calls failed, " << left_on_purpose
                        << " nvJPEG objects left after faults for good; " << counts.datum_runs
                        << " pipelines of encoded Datums, " << counts.byte_runs
                        << " of 8-bit samples; images " << counts.host_decoded
                        << " decoded while the decoders were lent, " << counts.refused
                        << " refused, " << counts.decoded_ahead << " decoded ahead");
  CHECK(leaks == 0);
  CHECK(mixed_devices == 0);
  CHECK(faults.failed_calls > 0);
  CHECK(counts.datum_runs > 0);
  CHECK(counts.byte_runs > 0);
  WARN(counts.host_decoded > 0);  // as producers happened to meet: timing
  CHECK(counts.refused > 0);
  CHECK(counts.decoded_ahead > 0);
}
