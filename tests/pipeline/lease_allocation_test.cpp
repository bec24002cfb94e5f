// What `lease` promises about allocation, counted: this program replaces malloc (in builds
// without a sanitizer, whose own allocator cannot be replaced) to count the calls each thread
// makes.

#include <crema/pipeline/double_buffered_pipeline.hpp>

#include "common/malloc_counter.hpp"
#include "common/watchdog.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

TEST_SUITE("lease allocation") {
  TEST_CASE("a thread that releases leases allocates at most twice, then never again") {
#ifdef CREMA_TEST_SANITIZED
    std::printf("crema-test-skip: counting malloc calls needs a build without a sanitizer\n");
#else
    using namespace std::chrono_literals;
    crema::test::watchdog guard(60s, "lease allocation");
    const auto identity = [](const int& record) { return record; };
    std::vector<int> records(1000);
    crema::double_buffered_pipeline pipe{
        crema::vector_source<int>(records),
        identity,
        {.batch_size = 8, .prefetch = 2, .producers = 2, .threads = 2}};
    using lease_type = decltype(pipe.consumer(0).pull());

    // A releasing thread that takes leases one at a time and counts what resetting them costs:
    // a release either returns the slot to the free pool or wakes a waiting producer through
    // the thread pool, and each queue gives a thread a block of its own the first time.
    std::mutex mutex;
    std::condition_variable changed;
    std::optional<lease_type> handed;
    bool finished = false;
    std::size_t allocating_releases = 0;
    std::size_t mallocs = 0;
    std::thread releaser([&] {
      for (;;) {
        std::unique_lock lock(mutex);
        changed.wait(lock, [&] { return handed.has_value() || finished; });
        if (!handed) return;
        lease_type lease = std::move(*handed);
        handed.reset();
        const std::size_t before = crema::test::mallocs_on_this_thread;
        lease.reset();
        const std::size_t made = crema::test::mallocs_on_this_thread - before;
        allocating_releases += made > 0 ? 1 : 0;
        mallocs += made;
        changed.notify_all();
      }
    });
    auto consumer = pipe.consumer(0);
    for (int i = 0; i < 20000; ++i) {
      lease_type lease = consumer.pull();
      REQUIRE(lease);
      std::unique_lock lock(mutex);
      handed.emplace(std::move(lease));
      changed.notify_all();
      changed.wait(lock, [&] { return !handed.has_value(); });
    }
    {
      std::scoped_lock lock(mutex);
      finished = true;
    }
    changed.notify_all();
    releaser.join();
    CHECK(allocating_releases <= 2);
    CHECK(mallocs <= 8);
    CHECK(pipe.stats().producer_suspensions > 0);  // the waking path was taken too
#endif
  }
}
