#pragma once

// moodycamel's queues sit at a different path in each way of installing them: Debian's package
// puts them under <concurrentqueue/>, an upstream `cmake --install` under <moodycamel/>, and its
// source tree (or a Conan package) at the top. Every crema header includes this one instead.
#if __has_include(<concurrentqueue/concurrentqueue.h>)
#include <concurrentqueue/concurrentqueue.h>
#include <concurrentqueue/lightweightsemaphore.h>
#elif __has_include(<moodycamel/concurrentqueue.h>)
#include <moodycamel/concurrentqueue.h>
#include <moodycamel/lightweightsemaphore.h>
#elif __has_include(<concurrentqueue.h>)
#include <concurrentqueue.h>
#include <lightweightsemaphore.h>
#else
#error "crema needs moodycamel's concurrentqueue (Debian: libconcurrentqueue-dev)"
#endif
