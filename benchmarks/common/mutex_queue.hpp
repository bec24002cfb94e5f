#pragma once

// The Caffe-design baseline: a blocking queue built from std::mutex, std::condition_variable
// and std::queue, as Caffe's BlockingQueue was. A pair of them (free and full) moves one record
// per handoff.

#include <condition_variable>
#include <mutex>
#include <queue>

namespace crema::bench {

template <class T>
class mutex_queue {
 public:
  void push(T value) {
    {
      std::scoped_lock lock(mutex_);
      queue_.push(std::move(value));
    }
    changed_.notify_one();
  }
  T pop() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !queue_.empty(); });
    T value = std::move(queue_.front());
    queue_.pop();
    return value;
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::queue<T> queue_;
};

}  // namespace crema::bench
