#include <crema/memory/emulated_stream.hpp>

#include "common/gate.hpp"

#include <doctest/doctest.h>

#include <stdexcept>
#include <thread>
#include <vector>

TEST_SUITE("emulated_stream") {
  TEST_CASE("work runs in launch order on a thread other than the caller's") {
    crema::emulated_stream stream;
    std::vector<int> order;
    std::thread::id worker;
    for (int i = 0; i < 100; ++i) {
      stream.launch([&order, &worker, i] {
        order.push_back(i);
        worker = std::this_thread::get_id();
      });
    }
    stream.synchronize();
    REQUIRE(order.size() == 100);
    for (int i = 0; i < 100; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
    CHECK(worker != std::this_thread::get_id());
    CHECK_FALSE(stream.is_inline());
  }

  TEST_CASE("an event is ready only once the work before it has run") {
    crema::emulated_stream stream;
    crema::test::gate gate;
    stream.launch([&] { gate.wait(); });
    const auto before = stream.record();
    CHECK_FALSE(before.ready());
    gate.open();
    before.wait();
    CHECK(before.ready());
    CHECK(crema::emulated_event{}.ready());
  }

  TEST_CASE("an exception thrown by stream work reaches synchronize and later events") {
    crema::emulated_stream stream;
    stream.launch([] { throw std::runtime_error("copy failed"); });
    const auto after = stream.record();
    CHECK_THROWS_WITH_AS(after.wait(), "copy failed", std::runtime_error);
    CHECK_THROWS_WITH_AS(stream.synchronize(), "copy failed", std::runtime_error);
  }

  TEST_CASE("an inline stream runs work before launch returns") {
    crema::emulated_stream stream{crema::emulated_stream::run_inline};
    int value = 0;
    stream.launch([&] { value = 1; });
    CHECK(value == 1);
    CHECK(stream.record().ready());
    CHECK(stream.is_inline());
  }

  TEST_CASE("an event outlives its stream and is ready then") {
    crema::emulated_event event;
    int ran = 0;
    {
      crema::emulated_stream stream;
      stream.launch([&] { ++ran; });
      event = stream.record();
    }  // the destructor drains the queue
    CHECK(event.ready());
    CHECK(ran == 1);
  }
}
