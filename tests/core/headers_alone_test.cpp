// The core as a file compiled with -I and nothing else gets it: no libcrema linked, its
// non-template code (the thread pool, the queues, the pipeline's counters and watches) included
// inline by the headers. This program links {fmt}, concurrentqueue and threads only.
#include <crema/core/detail/library_inline.hpp>
#include <crema/core/thread_pool.hpp>
#include <crema/pipeline/detail/producer_task.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/vector_source.hpp>

#include <doctest/doctest.h>
#include <fmt/core.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

static_assert(CREMA_CORE_IN_HEADERS, "this test is of the core without libcrema");

namespace {

crema::detail::producer_task count_on(crema::thread_pool& pool, std::atomic<int>& done) {
  co_await pool.schedule();
  done.fetch_add(1);
}

}  // namespace

TEST_SUITE("the core's headers alone") {
  TEST_CASE("a thread pool runs coroutines without libcrema") {
    std::atomic<int> done{0};
    {
      crema::thread_pool pool(2);
      for (int i = 0; i < 100; ++i) count_on(pool, done).coroutine.resume();
      while (done.load() < 100) std::this_thread::yield();
    }
    CHECK(done.load() == 100);
  }

  TEST_CASE("a pipeline delivers every record once and formats its stats without libcrema") {
    std::vector<int> records(1000);
    std::iota(records.begin(), records.end(), 0);
    crema::double_buffered_pipeline pipe{crema::vector_source<int>(records),
                                         [](const int& record) { return 2 * record; },
                                         {.batch_size = 64,
                                          .producers = 3,
                                          .threads = 2,
                                          .mode = crema::pipeline_mode::single_pass}};
    std::vector<int> seen;
    for (auto batch : pipe.consumer(0)) {
      for (int value : *batch) seen.push_back(value);
    }
    std::sort(seen.begin(), seen.end());
    std::vector<int> doubled(records.size());
    std::transform(records.begin(), records.end(), doubled.begin(), [](int r) { return 2 * r; });
    CHECK(seen == doubled);
    const std::string line = fmt::format("{}", pipe.stats());
    CHECK(line.find("produced 16 batches (1000 records), consumed 16") == 0);
  }
}
