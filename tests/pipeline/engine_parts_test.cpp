// The engine's parts that know no Source or Transform, on their own: the release poller's rhythm,
// the stall watch, the run state. The pipeline tests cover them inside a running pipeline; these
// pin down what each decides, on inputs a running pipeline rarely reaches on cue.
#include <crema/pipeline/detail/channel_state.hpp>
#include <crema/pipeline/detail/release_poller.hpp>
#include <crema/pipeline/detail/run_state.hpp>
#include <crema/pipeline/detail/stall_watch.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace std::chrono_literals;
using crema::detail::channel_state;
using crema::detail::release_poller;

// A channel whose queues are numbers the test sets.
class fake_channel final : public channel_state {
 public:
  std::size_t queued() const override { return queued_now; }
  std::int64_t free_now() const noexcept override { return free_slots; }
  std::size_t waiting_producers() const noexcept override { return waiting; }
  std::size_t kick() override {
    ++kicks;
    return std::exchange(parked, 0);
  }
  void leave_waking_to_poller(bool poller_wakes) override { polled = poller_wakes; }
  void stop() override { stopped = true; }

  std::size_t queued_now = 0;
  std::int64_t free_slots = 0;
  std::size_t waiting = 0;
  std::size_t parked = 0;  // slots released for waiters, handed over by the next kick
  std::size_t kicks = 0;
  bool polled = false;
  bool stopped = false;
};

struct two_channels {
  fake_channel first;
  fake_channel second;
  std::vector<channel_state*> views{&first, &second};
};

}  // namespace

TEST_SUITE("engine parts") {
  TEST_CASE("the release poller sleeps at once until armed, then takes the releases over") {
    two_channels channels;
    crema::detail::run_state run;
    release_poller poller;
    CHECK(poller.on_idle(true) == 0ns);
    CHECK(channels.first.kicks == 0);
    poller.arm(channels.views, run);
    CHECK(poller.on_idle(true) == release_poller::shortest_poll);
    CHECK(channels.first.polled);  // releases leave waking to the poller now
    CHECK(channels.second.polled);
    CHECK(channels.first.kicks == 1);
  }

  TEST_CASE("the release poller polls as often as slots come back, and stops once none do") {
    two_channels channels;
    crema::detail::run_state run;
    release_poller poller;
    poller.arm(channels.views, run);
    std::chrono::nanoseconds interval = poller.on_idle(true);
    // Misses make the interval half as long again each time...
    const std::chrono::nanoseconds after_miss = poller.on_idle(false);
    CHECK(after_miss == interval * 3 / 2);
    interval = poller.on_idle(false);
    CHECK(interval == after_miss * 3 / 2);
    // ...a find shortens it by a third (not below the shortest) and is remembered...
    channels.second.parked = 2;
    const std::chrono::nanoseconds after_find = poller.on_idle(false);
    CHECK(after_find == interval * 2 / 3);
    CHECK(channels.second.parked == 0);
    // ...and a thread that goes idle again starts from the interval of the last find.
    poller.on_idle(false);
    CHECK(poller.on_idle(true) == interval);
    // Misses until the interval would pass the longest: polling ends, releases wake again.
    std::chrono::nanoseconds next = interval;
    int polls = 0;
    while (next != 0ns) {
      REQUIRE(++polls < 100);
      REQUIRE(next <= release_poller::longest_poll);
      next = poller.on_idle(false);
    }
    CHECK_FALSE(channels.first.polled);
    CHECK_FALSE(channels.second.polled);
  }

  TEST_CASE("the release poller stops polling once the run stops, and a stop stops the parts") {
    two_channels channels;
    crema::detail::run_state run;
    const std::stop_callback stopping(run.token(), [&] {
      for (channel_state* each : channels.views) each->stop();
    });
    release_poller poller;
    poller.arm(channels.views, run);
    REQUIRE(poller.on_idle(true) > 0ns);
    CHECK(run.request_stop());
    CHECK_FALSE(run.request_stop());  // once
    CHECK(channels.first.stopped);
    CHECK(channels.second.stopped);
    CHECK(poller.on_idle(false) == 0ns);
    CHECK_FALSE(channels.first.polled);
  }

  TEST_CASE("the stall watch names the consumer every producer waits for") {
    two_channels channels;
    // Consumer 0 waits with nothing queued; both producers wait for consumer 1's slots.
    channels.second.waiting = 2;
    CHECK(crema::detail::holder_of(channels.views, 0, 2, 0) == std::optional<std::size_t>(1));
    // One producer waiting for its turn to claim counts as held too.
    channels.second.waiting = 1;
    CHECK(crema::detail::holder_of(channels.views, 0, 2, 1) == std::optional<std::size_t>(1));
    // A producer still running (neither waiting for a slot nor for its turn): nobody is held.
    CHECK_FALSE(crema::detail::holder_of(channels.views, 0, 2, 0));
    // A batch queued for the waiting consumer, or a producer waiting for its slots: not held.
    channels.second.waiting = 2;
    channels.first.queued_now = 1;
    CHECK_FALSE(crema::detail::holder_of(channels.views, 0, 2, 0));
    channels.first.queued_now = 0;
    channels.first.waiting = 1;
    CHECK_FALSE(crema::detail::holder_of(channels.views, 0, 2, 0));
    // No producer running: nothing to blame.
    channels.first.waiting = 0;
    CHECK_FALSE(crema::detail::holder_of(channels.views, 0, 0, 0));
  }

  TEST_CASE("the stall watch's error names both consumers, the wait and the holder's slots") {
    fake_channel holder;
    holder.queued_now = 3;
    holder.outstanding = 1;
    CHECK_THROWS_WITH_AS(
        crema::detail::fail_held_back(0, 120, 1, holder),
        "pipeline: consumer 0 waited 120 ms for a batch while the producers wait for a free slot "
        "of consumer 1 (3 queued, 1 leased); the consumers of a pipeline must pull in turn, or "
        "stop it",
        crema::pipeline_error);
  }

  TEST_CASE("the run state keeps the first failure, nested in a pipeline_error, and stops") {
    crema::detail::run_state run;
    CHECK_FALSE(run.failed());
    run.fail(std::make_exception_ptr(std::runtime_error("disk gone")), "pipeline: first");
    run.fail(std::make_exception_ptr(std::runtime_error("later")), "pipeline: second");
    CHECK(run.failed());
    CHECK(run.stop_requested());
    CHECK_FALSE(run.stopped_without_failure());  // a consumer must get the failure, not an end
    try {
      run.rethrow_failure();
      FAIL("rethrow_failure returned");
    } catch (const crema::pipeline_error& error) {
      CHECK(std::string(error.what()) == "pipeline: first");
      CHECK_THROWS_WITH_AS(std::rethrow_if_nested(error), "disk gone", std::runtime_error);
    }
  }

  TEST_CASE("the run state tells a plain stop from a failure, also one that follows the stop") {
    crema::detail::run_state run;
    CHECK_FALSE(run.stopped_without_failure());
    CHECK(run.request_stop());
    CHECK(run.stopped_without_failure());
    // A producer that fails after the stop, in its last record: its error is not lost.
    run.fail(std::make_exception_ptr(std::runtime_error("disk gone")), "pipeline: late");
    CHECK_FALSE(run.stopped_without_failure());
    CHECK_THROWS_AS(run.rethrow_failure(), crema::pipeline_error);
  }

  TEST_CASE("the run state's last producer out runs the closing step, unless the run stopped") {
    crema::detail::run_state run;
    run.start_producers(2);
    int closed = 0;
    run.producer_ends([&]() noexcept { ++closed; });
    CHECK(closed == 0);
    CHECK(run.producers_alive() == 1);
    run.producer_ends([&]() noexcept { ++closed; });
    CHECK(closed == 1);
    run.wait_for_producers();  // returns: none runs

    crema::detail::run_state stopped;
    stopped.start_producers(1);
    stopped.request_stop();
    stopped.producer_ends([&]() noexcept { ++closed; });
    CHECK(closed == 1);
  }
}
