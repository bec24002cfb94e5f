#include <crema/core/detail/pointer_queue.hpp>

#include <doctest/doctest.h>

#include <array>
#include <chrono>
#include <thread>

// The queues of pointers that slot pools and queue pairs keep their slots and waiters in: one
// moodycamel queue of void* under them all, each giving back the pointer type it was given.
TEST_SUITE("pointer queues") {
  TEST_CASE("pointer_queue: pointers come out as they went in and in order from one producer") {
    std::array<double, 3> values{1.5, 2.5, 3.5};
    crema::detail::pointer_queue<double> queue;
    double* item = &values[0];
    CHECK_FALSE(queue.try_dequeue(item));
    CHECK(item == &values[0]);  // untouched when there was nothing
    REQUIRE(queue.enqueue(&values[2]));
    REQUIRE(queue.enqueue(nullptr));  // a stop's wake-up is a null pointer
    REQUIRE(queue.enqueue(&values[1]));
    CHECK(queue.size_approx() == 3);
    for (double* expected : {&values[2], static_cast<double*>(nullptr), &values[1]}) {
      REQUIRE(queue.try_dequeue(item));
      CHECK(item == expected);
    }
    CHECK_FALSE(queue.try_dequeue(item));
  }

  TEST_CASE(
      "blocking_pointer_queue: a waiting consumer gets what another thread enqueues and a "
      "timeout below zero waits for nothing") {
    int value = 7;
    crema::detail::blocking_pointer_queue<int> queue(4);
    int* item = nullptr;
    CHECK_FALSE(queue.wait_dequeue_timed(item, std::chrono::milliseconds(1)));
    CHECK_FALSE(queue.wait_dequeue_timed(item, std::chrono::milliseconds(-5)));  // no wait at all
    CHECK(item == nullptr);
    std::thread producer([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      queue.enqueue(&value);
    });
    queue.wait_dequeue(item);
    producer.join();
    REQUIRE(item == &value);
    CHECK(*item == 7);
    REQUIRE(queue.enqueue(&value));
    item = nullptr;
    CHECK(queue.wait_dequeue_timed(item, std::chrono::seconds(10)));
    CHECK(item == &value);
  }
}
