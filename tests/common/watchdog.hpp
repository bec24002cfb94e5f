#pragma once

#include "common/stack_trace.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace crema::test {

/// Ends the test program with a message and every thread's stack (`write_every_stack`) if the
/// scope it guards has not finished in time, so a test that would hang fails instead of
/// stalling CI until its timeout, and says where it waited.
class watchdog {
 public:
  watchdog(std::chrono::milliseconds limit, std::string what)
      : what_(std::move(what)), thread_([this, limit] {
          std::unique_lock lock(mutex_);
          if (!finished_.wait_for(lock, limit, [&] { return done_; })) {
            std::fprintf(stderr,
                         "watchdog: '%s' did not finish within %lld ms; its threads' stacks:\n",
                         what_.c_str(), static_cast<long long>(limit.count()));
            std::fflush(stderr);
            write_every_stack();
            std::_Exit(3);
          }
        }) {}
  watchdog(const watchdog&) = delete;
  watchdog& operator=(const watchdog&) = delete;
  ~watchdog() {
    {
      std::scoped_lock lock(mutex_);
      done_ = true;
    }
    finished_.notify_all();
    thread_.join();
  }

 private:
  std::string what_;
  std::mutex mutex_;
  std::condition_variable finished_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace crema::test
