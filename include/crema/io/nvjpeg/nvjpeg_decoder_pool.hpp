#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/io/image/image_transform.hpp>
#include <crema/io/nvjpeg/nvjpeg_library.hpp>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

/// @file
/// The decoders an `nvjpeg_batcher`'s producers share, lent for one batch at a time. Component
/// `crema::nvjpeg`.

namespace crema::cuda {

/// @brief Where the finishing steps of an `nvjpeg_batcher`'s batches spent the host's time,
/// summed over its producers (steady clock): what to look at when choosing its decoders.
struct nvjpeg_feed_times {
  std::uint64_t batches = 0;  ///< the batches finished
  /// planning them (headers, windows, nvJPEG's parse, the CPU path's images, the GPU-assisted
  /// decoder's host phase), before a decoder is needed
  std::chrono::nanoseconds planning{0};
  /// waiting for a decoder while every one was lent (decoding on the CPU meanwhile, if allowed)
  std::chrono::nanoseconds borrowing{0};
  /// in a decoder's turn, waiting for its previous batch to be done on the device
  std::chrono::nanoseconds waiting{0};
  /// in a decoder's turn, queueing the work (the hardware engine's batch, the kernels)
  std::chrono::nanoseconds queueing{0};
};

/// @brief The decoders every copy of a batcher (every producer's) shares, by device: made
/// there on first need, at most a limit on each, each lent to one producer at a time for one
/// batch's decoding (its nvJPEG handle, state and buffers serve one batch at a time); and, on
/// each device, the nvJPEG library with which all the producers plan their batches at once.
template <class Decoder>
class nvjpeg_decoder_pool {
 public:
  /// @brief A decoder lent for one batch: given back when destroyed, even on an error.
  class loan {
   public:
    loan(nvjpeg_decoder_pool& pool, int device, std::unique_ptr<Decoder> decoder) noexcept
        : pool_(&pool), device_(device), decoder_(std::move(decoder)) {}
    loan(loan&& other) noexcept
        : pool_(std::exchange(other.pool_, nullptr)),
          device_(other.device_),
          decoder_(std::move(other.decoder_)) {}
    loan(const loan&) = delete;
    loan& operator=(const loan&) = delete;
    loan& operator=(loan&&) = delete;
    ~loan() {
      if (pool_ != nullptr) pool_->give_back(device_, std::move(decoder_));
    }
    Decoder& operator*() const noexcept { return *decoder_; }
    Decoder* operator->() const noexcept { return decoder_.get(); }

   private:
    nvjpeg_decoder_pool* pool_;
    int device_;
    std::unique_ptr<Decoder> decoder_;
  };

  nvjpeg_decoder_pool(image_transform_options transform, nvjpeg_options decoding, std::size_t limit)
      : transform_(std::move(transform)), decoding_(decoding), limit_(limit) {}

  /// @brief An idle decoder on `device` (the device current), a new one while fewer than the
  /// limit are made there, else the first given back.
  /// @throws what making a decoder throws (crema::cuda_error); the pool stays usable
  [[nodiscard]] loan borrow(int device) {
    std::unique_lock lock(mutex_);
    shelf& on = shelf_of(device);
    returned_.wait(lock, [&] { return available(on); });
    return lend(lock, on);
  }
  /// @brief As `borrow`, without waiting: none while every decoder allowed on `device` is lent.
  [[nodiscard]] std::optional<loan> try_borrow(int device) {
    std::unique_lock lock(mutex_);
    shelf& on = shelf_of(device);
    if (!available(on)) return std::nullopt;
    return lend(lock, on);
  }

  /// @return the nvJPEG with which producers plan their batches on `device` (the device
  /// current), made on first need: it only parses, and its handle is shared as nvJPEG allows
  /// @throws crema::cuda_error if nvJPEG cannot be started; the pool stays usable
  [[nodiscard]] std::shared_ptr<const nvjpeg_library> planning(int device) {
    {
      const std::scoped_lock lock(mutex_);
      if (shelf_of(device).planning) return shelf_of(device).planning;
    }
    auto made = std::make_shared<const nvjpeg_library>(decoding_);  // the lock released
    const std::scoped_lock lock(mutex_);
    shelf& on = shelf_of(device);
    if (!on.planning) on.planning = std::move(made);  // else another thread's came first
    return on.planning;
  }

  /// @return the decoders made on `device`
  [[nodiscard]] std::size_t made(int device) {
    const std::scoped_lock lock(mutex_);
    return shelf_of(device).made;
  }
  /// @return the images producers decoded themselves while every decoder was lent
  [[nodiscard]] std::uint64_t host_decoded() const noexcept {
    return host_decoded_.load(std::memory_order_relaxed);
  }
  /// @return the images nvJPEG does not take, which producers decoded on the CPU path
  [[nodiscard]] std::uint64_t refused() const noexcept {
    return refused_.load(std::memory_order_relaxed);
  }
  /// @return the images producers decoded with nvJPEG's GPU-assisted decoder, the host's part
  /// on their threads
  [[nodiscard]] std::uint64_t decoded_ahead() const noexcept {
    return ahead_.load(std::memory_order_relaxed);
  }
  /// @return where the batches' finishing steps spent the host's time so far
  [[nodiscard]] nvjpeg_feed_times times() const noexcept {
    const auto read = [](const std::atomic<std::int64_t>& ns) {
      return std::chrono::nanoseconds(ns.load(std::memory_order_relaxed));
    };
    return {batches_.load(std::memory_order_relaxed), read(planning_ns_), read(borrowing_ns_),
            read(waiting_ns_), read(queueing_ns_)};
  }
  /// @return the transform the decoders and the producers' CPU path apply
  [[nodiscard]] const image_transform_options& transform() const noexcept { return transform_; }

  /// @brief What a batch's finishing step counts: images decoded ahead (the GPU-assisted
  /// decoder's), refused by nvJPEG, decoded by the producer while every decoder was lent, and
  /// the step's times.
  void count_ahead(std::size_t images) noexcept {
    ahead_.fetch_add(images, std::memory_order_relaxed);
  }
  void count_refused(std::size_t images) noexcept {
    refused_.fetch_add(images, std::memory_order_relaxed);
  }
  void count_host_decoded() noexcept { host_decoded_.fetch_add(1, std::memory_order_relaxed); }
  void add_times(std::chrono::nanoseconds planning, std::chrono::nanoseconds borrowing,
                 std::chrono::nanoseconds waiting, std::chrono::nanoseconds queueing) noexcept {
    batches_.fetch_add(1, std::memory_order_relaxed);
    planning_ns_.fetch_add(planning.count(), std::memory_order_relaxed);
    borrowing_ns_.fetch_add(borrowing.count(), std::memory_order_relaxed);
    waiting_ns_.fetch_add(waiting.count(), std::memory_order_relaxed);
    queueing_ns_.fetch_add(queueing.count(), std::memory_order_relaxed);
  }

 private:
  struct shelf {
    int device = 0;
    std::shared_ptr<const nvjpeg_library> planning = {};
    std::size_t made = 0;
    std::vector<std::unique_ptr<Decoder>> idle = {};
  };

  // The caller holds mutex_.
  [[nodiscard]] bool available(const shelf& on) const noexcept {
    return !on.idle.empty() || limit_ == 0 || on.made < limit_;
  }
  // An idle decoder, else a new one (made with mutex_ released); the caller holds `lock` and
  // checked `available(on)`.
  loan lend(std::unique_lock<std::mutex>& lock, shelf& on) {
    const int device = on.device;
    if (!on.idle.empty()) {
      std::unique_ptr<Decoder> decoder = std::move(on.idle.back());
      on.idle.pop_back();
      return loan(*this, device, std::move(decoder));
    }
    on.idle.reserve(on.made + 1);  // so that giving it back never allocates
    ++on.made;
    lock.unlock();
    try {
      return loan(*this, device, std::make_unique<Decoder>(transform_, decoding_));
    } catch (...) {
      lock.lock();
      --on.made;
      lock.unlock();
      returned_.notify_all();
      throw;
    }
  }

  void give_back(int device, std::unique_ptr<Decoder> decoder) noexcept {
    {
      const std::scoped_lock lock(mutex_);
      shelf_of(device).idle.push_back(std::move(decoder));
    }
    returned_.notify_all();  // the waiters may wait for different devices
  }
  // The caller holds mutex_.
  shelf& shelf_of(int device) {
    for (shelf& on : shelves_) {
      if (on.device == device) return on;
    }
    shelves_.push_back({.device = device});
    return shelves_.back();
  }

  image_transform_options transform_;
  nvjpeg_options decoding_;
  std::size_t limit_;
  std::mutex mutex_;
  std::condition_variable returned_;
  std::deque<shelf> shelves_;  // a deque: the references borrow holds stay valid
  std::atomic<std::uint64_t> host_decoded_{0};
  std::atomic<std::uint64_t> refused_{0};
  std::atomic<std::uint64_t> ahead_{0};
  std::atomic<std::uint64_t> batches_{0};
  std::atomic<std::int64_t> planning_ns_{0};
  std::atomic<std::int64_t> borrowing_ns_{0};
  std::atomic<std::int64_t> waiting_ns_{0};
  std::atomic<std::int64_t> queueing_ns_{0};
};

}  // namespace crema::cuda
