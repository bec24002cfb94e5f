#pragma once

#include <condition_variable>
#include <mutex>

namespace crema::test {

/// A one-shot gate: work launched on an emulated stream can wait on it, so a test can hold an
/// asynchronous copy in flight for as long as it needs to look at the buffer.
class gate {
 public:
  void open() {
    {
      std::scoped_lock lock(mutex_);
      open_ = true;
    }
    changed_.notify_all();
  }
  void wait() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return open_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  bool open_ = false;
};

}  // namespace crema::test
