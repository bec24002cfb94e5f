#pragma once

#include <crema/core/batch_label.hpp>
#include <crema/core/cuda/cuda_try.hpp>
#include <crema/core/cuda/device.hpp>
#include <crema/core/error.hpp>
#include <crema/core/record_shape.hpp>
#include <crema/io/image/encoded_sample_reader.hpp>
#include <crema/io/image/image_transform.hpp>
#include <crema/io/nvjpeg/nvjpeg_batch_decoder.hpp>
#include <crema/memory/cuda/cuda_device_resource.hpp>
#include <crema/memory/cuda/cuda_stream.hpp>
#include <crema/memory/cuda/host_pinned_resource.hpp>
#include <crema/memory/device_span.hpp>
#include <crema/pipeline/device_batch.hpp>
#include <crema/pipeline/sample_context.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

/// @file
/// The pipeline's batch transform for JPEGs decoded on the GPU: each producer reads the files (or
/// takes the encoded Datums) of its batch into the batch's own buffer on its thread, then, as the
/// batch's finishing step, plans their decoding (headers, windows, nvJPEG's parsing, the CPU path
/// for the images nvJPEG does not take) on its thread too, and has the rest decoded by nvJPEG and
/// resampled on the GPU straight into the batch's device memory, on the batch's own stream, and
/// uploads the labels. The consumer's stream waits for one event a batch. The producers share a few
/// decoders on each device, lent for one batch's decoding at a time: the GPU's JPEG engine is one,
/// and more decoders feeding it deliver less. A producer that finds every decoder lent may decode
/// the last images of its batch itself, on the CPU path, until one comes back (`max_host_share`):
/// the host's idle cores join the engine where it is the bound. Component `crema::nvjpeg`;
/// `nvjpeg_batcher<T>` with the kernels is in nvjpeg_batcher.cuh.

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

/// @brief Where an `nvjpeg_batcher`'s batches live and how they are read.
struct nvjpeg_batcher_options {
  /// The device of each consumer's batches (consumer i on devices[i]); empty: the device
  /// current when the batches are made.
  std::vector<int> devices = {};
  /// At most this many producers decode at once on each device, each with a decoder (nvJPEG's
  /// state and buffers) of its own; the others wait for one when their batch is filled: a few
  /// decoders deliver more than one a producer (docs/performance.md, "On a GPU").
  /// 0: a decoder for every producer that needs one.
  std::size_t decoders = 4;
  /// While every decoder of its device is lent, a producer may decode its batch's images
  /// itself, the last first, with the CPU path (`image_transform`, windows decoded at full size
  /// as on the GPU) into pinned memory uploaded with the batch, and take the first decoder given
  /// back for the rest: at most this share of each batch (a slot that does so keeps pinned
  /// memory for that many samples). Only images a decoder would decode in its turn: not those
  /// the producer decoded ahead with the GPU-assisted decoder, whose windows are on the GPU
  /// already (so none where the GPU has no JPEG engine). Which images go to the CPU then depends on
  /// timing, not on which window a sample gets; their values are the CPU path's, within the bound
  /// nvJPEG's own are. 0 (the default): producers wait for a decoder. For hosts where the JPEG
  /// engine is the bound and cores are idle; what it gave and cost where measured is in
  /// docs/performance.md ("On a GPU").
  double max_host_share = 0.0;
  nvjpeg_options decoding = {};
  image_file_reader_options reading = {};
};

/// @brief A batch transform (`batch_transform`) over image files (`image_folder_source`,
/// `image_list_source`) or encoded Datums, whose batches are decoded on the GPU by the producer
/// that filled them. Samples are `image_transform`'s, windows decoded at full size
/// (`basic_nvjpeg_batch_decoder`); labels are T.
/// @tparam T float (normalised) or std::uint8_t
/// @tparam Decoder `basic_nvjpeg_batch_decoder<kernel_resampler>` on a GPU
template <class T, class Decoder>
class basic_nvjpeg_batcher {
 public:
  class batch;

  /// @brief The decoders every copy of a batcher (every producer's) shares, by device: made
  /// there on first need, at most a limit on each, each lent to one producer at a time for one
  /// batch's decoding (its nvJPEG handle, state and buffers serve one batch at a time); and, on
  /// each device, the nvJPEG library with which all the producers plan their batches at once.
  class decoder_pool {
   public:
    /// @brief A decoder lent for one batch: given back when destroyed, even on an error.
    class loan {
     public:
      loan(decoder_pool& pool, int device, std::unique_ptr<Decoder> decoder) noexcept
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
      decoder_pool* pool_;
      int device_;
      std::unique_ptr<Decoder> decoder_;
    };

    decoder_pool(image_transform_options transform, nvjpeg_options decoding, std::size_t limit)
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

   private:
    friend class basic_nvjpeg_batcher::batch;  // counts its host-decoded images and times

    // One batch's times, added.
    void add_times(std::chrono::nanoseconds planning, std::chrono::nanoseconds borrowing,
                   std::chrono::nanoseconds waiting, std::chrono::nanoseconds queueing) noexcept {
      batches_.fetch_add(1, std::memory_order_relaxed);
      planning_ns_.fetch_add(planning.count(), std::memory_order_relaxed);
      borrowing_ns_.fetch_add(borrowing.count(), std::memory_order_relaxed);
      waiting_ns_.fetch_add(waiting.count(), std::memory_order_relaxed);
      queueing_ns_.fetch_add(queueing.count(), std::memory_order_relaxed);
    }

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

  /// @brief One slot's batch: the encoded images on the host, the samples and labels on the
  /// device. Filled by one producer, then read by the consumer holding its lease.
  class batch {
   public:
    using value_type = T;
    using label_type = batch_label_t<T>;  // float for 8-bit samples: labels past 255 stay exact
    using view_type = device_batch_view<T, label_type>;
    using event_type = cuda_event;

    batch(std::size_t capacity, record_shape shape, int device,
          std::shared_ptr<decoder_pool> decoders, std::size_t most_on_host = 0)
        : shape_(shape),
          capacity_(capacity),
          most_on_host_(std::min(most_on_host, capacity)),
          labels_stride_((capacity * sizeof(label_type) + 255) / 256 * 256 / sizeof(T)),
          device_id_(device),
          // Host waits for its decoding (a refill's, device()'s) may last a whole batch's: asleep.
          stream_(std::make_shared<cuda_stream>(device, host_wait::sleep)),
          decoders_(std::move(decoders)),
          images_(capacity),
          offsets_(capacity + 1),
          keys_(capacity) {
      (void)::crema::detail::batch_elements("nvjpeg_batcher", capacity, shape);
      // Memory refused is an allocation_error naming the bytes, the side and the device.
      constexpr std::size_t aligned = cuda_device_resource::max_alignment;
      const std::size_t bytes = (labels_stride_ + capacity * shape.elements()) * sizeof(T);
      cuda_device_resource on_device(device);
      device_ = std::shared_ptr<void>(
          on_device.allocate(bytes, aligned),
          [on_device, bytes](void* p) mutable { on_device.deallocate(p, bytes, aligned); });
      const std::size_t label_bytes = capacity * sizeof(label_type);
      labels_ = std::shared_ptr<void>(
          host_pinned_resource{}.allocate(label_bytes, aligned),
          [label_bytes](void* p) { host_pinned_resource{}.deallocate(p, label_bytes, aligned); });
    }

    /// @brief The batch on the device for work queued on `stream`: `stream` waits for the
    /// decoding's event (the host does not). For the consumer.
    /// @throws crema::config_error naming both devices if `stream` is another device's than the
    ///         batch (`nvjpeg_batcher_options::devices` not set for a consumer on another)
    [[nodiscard]] view_type device(cuda_stream& stream) const {
      ::crema::detail::check_stream_device(
          "nvjpeg_batcher", device_id_, stream.device_id(),
          "give each consumer's device in nvjpeg_batcher_options::devices");
      stream.wait(ready_);
      return view();
    }
    /// @brief The batch on the device once its decoding has finished: the host waits.
    [[nodiscard]] view_type device() const {
      ready_.wait();
      return view();
    }
    /// @brief The next decoding into this batch waits for `event` (the consumer's last use of
    /// it). Called through `lease::release_after`.
    void retire_after(event_type event) {
      retired_ = std::move(event);
      retired_pending_ = true;
    }

    /// @brief The finishing step (the producer's): plans the decoding of the batch's
    /// `info.size` images, decodes those nvJPEG does not take on the CPU path and has those of
    /// its GPU-assisted decoder decoded, the host's part here (all on this thread, before a
    /// decoder is needed), then decodes the rest on the batch's stream into its device memory
    /// with a decoder of the batcher's for that device (the device made current meanwhile). While
    /// every one is lent, decodes the last images of the decoder's turn on the CPU path itself,
    /// up to the batcher's `max_host_share`, then waits for one (none needed where nothing is
    /// left for it); uploads those samples and the labels, records one event.
    /// @throws crema::format_error naming the image that does not decode
    void finish(const batch_info& info) {
      const scoped_device on(device_id_);
      size_ = info.size;
      if (retired_pending_) {
        stream_->wait(retired_);
        retired_pending_ = false;
      }
      for (std::size_t i = 0; i < size_; ++i) {
        images_[i].bytes =
            std::span<const std::byte>(bytes_).subspan(offsets_[i], offsets_[i + 1] - offsets_[i]);
        images_[i].key = keys_[i];
      }
      // The host's part, on this producer's thread, before a decoder is needed.
      using clock = std::chrono::steady_clock;
      const clock::time_point start = clock::now();
      if (!plan_) plan_.emplace(decoders_->planning(device_id_), decoders_->transform());
      const std::span<const encoded_image> images =
          std::span<const encoded_image>(images_).first(size_);
      plan_->make(images);
      // The GPU-assisted decoder's images (what the engine refuses; every JPEG without one) and
      // what nvJPEG does not take, decoded here too: not in the turn of a decoder other
      // producers wait for.
      plan_->decode_hybrid(images);
      decoders_->ahead_.fetch_add(plan_->ahead().size(), std::memory_order_relaxed);
      const std::span<const std::size_t> refused = plan_->on_host();
      if (!refused.empty()) {
        if (refused_samples_.size() < refused.size() * shape_.elements()) {
          refused_samples_.resize(refused.size() * shape_.elements());
        }
        plan_->decode_on_host(images, std::span<T>(refused_samples_));
        decoders_->refused_.fetch_add(refused.size(), std::memory_order_relaxed);
      }
      const clock::time_point planned = clock::now();
      // While every decoder is lent, this producer decodes the images a decoder would decode in
      // its turn itself, the last first, up to its share; those decoded ahead are on the GPU
      // already. They are staged in order, the last at the share's last sample.
      const std::span<const std::size_t> in_turn = plan_->in_turn();
      const bool ahead = !plan_->ahead().empty();
      const std::size_t most = std::min(most_on_host_, in_turn.size());
      std::size_t left = 0;
      // None borrowed (nor made) for a batch a decoder has nothing of.
      std::optional<typename decoder_pool::loan> decoder;
      const auto try_borrow = [&] {
        if (auto lent = decoders_->try_borrow(device_id_)) decoder.emplace(std::move(*lent));
      };
      if (!in_turn.empty() || ahead) try_borrow();
      while (!decoder && left < most) {
        ++left;
        decode_on_host(in_turn[in_turn.size() - left], most - left);
        try_borrow();
      }
      left_.assign(in_turn.end() - static_cast<std::ptrdiff_t>(left), in_turn.end());
      nvjpeg_batch_counts turn;
      clock::time_point lent = clock::now();
      const std::size_t sample = shape_.elements();
      if (left < in_turn.size() || ahead) {
        plan_->leave(left_);
        if (!decoder) decoder.emplace(decoders_->borrow(device_id_));  // waits for one
        lent = clock::now();
        (*decoder)->decode(*plan_, images, data(), stream_->native_handle());
        turn = (*decoder)->last_batch();
      } else {
        upload(refused, refused_samples_.data());  // no decoder needed: the rest is decoded
      }
      decoder.reset();
      decoders_->add_times(planned - start, lent - planned, turn.waited, turn.queued);
      if (left > 0) upload(left_, staged_samples_.data() + (most - left) * sample);
      CREMA_CUDA_TRY(cudaMemcpyAsync(device_.get(), labels_.get(), size_ * sizeof(label_type),
                                     cudaMemcpyHostToDevice, stream_->native_handle()));
      ready_ = stream_->record();
    }

    /// @return records in this batch (the last of a single pass may hold fewer)
    [[nodiscard]] std::size_t size() const noexcept { return size_; }
    [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
    [[nodiscard]] record_shape shape() const noexcept { return shape_; }
    /// @return the stream the batch is decoded on
    [[nodiscard]] cuda_stream& stream() const noexcept { return *stream_; }

   private:
    friend class basic_nvjpeg_batcher;

    // Record i's encoded bytes, sample generator, key and label (the producer's side; records
    // 0, 1, 2, ... in order, as the pipeline fills them).
    void stage(std::size_t i, std::span<const std::byte> encoded, const sample_rng& rng,
               std::string_view key, std::int32_t label) {
      ::crema::detail::check_batch_index("nvjpeg_batcher", "record", i, capacity_);
      if (i == 0) {
        // The last decoding of this slot may still read its bytes and labels: done first.
        ready_.wait();
        bytes_.clear();
      }
      offsets_[i] = bytes_.size();
      bytes_.insert(bytes_.end(), encoded.begin(), encoded.end());
      offsets_[i + 1] = bytes_.size();
      images_[i].rng = rng;
      keys_[i].assign(key);
      static_cast<label_type*>(labels_.get())[i] =
          ::crema::detail::exact_label<label_type>(label, key);
    }

    [[nodiscard]] T* data() const noexcept {
      return static_cast<T*>(device_.get()) + labels_stride_;
    }
    // Image i through the CPU path into staged sample `at` of the share.
    void decode_on_host(std::size_t i, std::size_t at) {
      const std::size_t sample = shape_.elements();
      staged_samples_.resize(most_on_host_ * sample);  // once
      if (!host_transform_) {  // the windows at full size, as the decoders decode them
        host_transform_.emplace(::crema::detail::at_full_size(decoders_->transform()));
      }
      (*host_transform_)(images_[i].bytes,
                         std::span<T>(staged_samples_).subspan(at * sample, sample), images_[i].rng,
                         images_[i].key);
      decoders_->host_decoded_.fetch_add(1, std::memory_order_relaxed);
    }
    // Samples decoded on the host uploaded to their places (`from`'s k-th is `images[k]`'s).
    void upload(std::span<const std::size_t> images, const T* from) const {
      ::crema::detail::upload_samples(images, from, data(), shape_.elements(),
                                      stream_->native_handle());
    }
    [[nodiscard]] view_type view() const {
      const auto* block = static_cast<const T*>(device_.get());
      return {device_span<const T>(block + labels_stride_, size_ * shape_.elements()),
              device_span<const label_type>(static_cast<const label_type*>(device_.get()), size_)};
    }
    record_shape shape_;
    std::size_t capacity_;
    std::size_t most_on_host_;   // the most images of a batch its producer decodes itself
    std::size_t labels_stride_;  // labels first, data from this element (at 256 bytes' multiple)
    int device_id_;
    std::shared_ptr<cuda_stream> stream_;
    std::shared_ptr<decoder_pool> decoders_;  // the batcher's
    std::optional<nvjpeg_batch_plan> plan_;   // made on first need
    std::shared_ptr<void> device_;            // labels, then samples
    std::shared_ptr<void> labels_;            // pinned
    std::vector<encoded_image> images_;
    // Every record's encoded bytes, one after the other, pinned: nvJPEG's engine copies its input
    // to the device itself, from pageable memory through the driver's staging.
    std::vector<std::byte, pinned_allocator<std::byte>> bytes_;
    std::vector<std::size_t> offsets_;  // record i's bytes: [offsets_[i], offsets_[i + 1])
    std::vector<std::string> keys_;
    std::size_t size_ = 0;
    std::optional<image_transform> host_transform_;  // made on first need
    std::vector<std::size_t> left_;  // the images of the last batch its producer decoded
    // Pinned, each grown on need: the share decoded while decoders are lent, and the images
    // nvJPEG does not take (an upload from them is done once stage(0) has waited).
    std::vector<T, pinned_allocator<T>> staged_samples_;
    std::vector<T, pinned_allocator<T>> refused_samples_;
    cuda_event ready_{};  // the last decoding and uploads
    cuda_event retired_{};
    bool retired_pending_ = false;
  };
  using batch_type = batch;

  explicit basic_nvjpeg_batcher(image_transform_options transform,
                                nvjpeg_batcher_options options = {})
      : transform_(std::move(transform)),
        options_(std::move(options)),
        shape_(image_transform(transform_).shape()),
        reader_(options_.reading),
        decoders_(
            std::make_shared<decoder_pool>(transform_, options_.decoding, options_.decoders)) {
    Decoder::check_options(transform_);  // now, not when the first batch is decoded
    nvjpeg_library::check(options_.decoding);
    if (!(options_.max_host_share >= 0.0 && options_.max_host_share <= 1.0)) {
      ::crema::detail::fail<config_error>(
          "nvjpeg_batcher: max_host_share must be from 0 to 1, got {}", options_.max_host_share);
    }
  }
  // Each producer's copy reads with a reader of its own and shares the decoders.
  basic_nvjpeg_batcher(const basic_nvjpeg_batcher& other)
      : transform_(other.transform_),
        options_(other.options_),
        shape_(other.shape_),
        reader_(options_.reading),
        decoders_(other.decoders_) {}
  basic_nvjpeg_batcher& operator=(const basic_nvjpeg_batcher&) = delete;
  basic_nvjpeg_batcher(basic_nvjpeg_batcher&&) noexcept = default;
  basic_nvjpeg_batcher& operator=(basic_nvjpeg_batcher&&) noexcept = delete;
  ~basic_nvjpeg_batcher() = default;

  /// @return one sample's shape
  [[nodiscard]] record_shape shape() const noexcept { return shape_; }

  /// @brief One slot's batch, on its consumer's device.
  [[nodiscard]] batch make_batch(const batch_context& where) const {
    int device = 0;
    if (where.consumer < options_.devices.size()) {
      device = options_.devices[where.consumer];
    } else {
      CREMA_CUDA_TRY(cudaGetDevice(&device));
    }
    return batch(
        where.batch_size, shape_, device, decoders_,
        static_cast<std::size_t>(options_.max_host_share * static_cast<double>(where.batch_size)));
  }

  /// @return the decoders made so far on `device` (at most `nvjpeg_batcher_options::decoders`)
  [[nodiscard]] std::size_t decoders_made(int device) const { return decoders_->made(device); }
  /// @return the images its producers decoded on the CPU while every decoder was lent
  [[nodiscard]] std::uint64_t host_decoded() const noexcept { return decoders_->host_decoded(); }
  /// @return the images nvJPEG does not take (not JPEGs, CMYK, streams cut short): decoded by
  /// its producers on the CPU path before they borrow a decoder
  [[nodiscard]] std::uint64_t refused() const noexcept { return decoders_->refused(); }
  /// @return the images of nvJPEG's GPU-assisted decoder (those the hardware engine refuses, such
  /// as progressive JPEGs; every JPEG where there is no engine): their host phase (Huffman
  /// decoding) done by its producers before they borrow a decoder, the rest queued on the GPU
  [[nodiscard]] std::uint64_t decoded_ahead() const noexcept { return decoders_->decoded_ahead(); }
  /// @return where its batches' finishing steps spent the host's time so far
  [[nodiscard]] nvjpeg_feed_times times() const noexcept { return decoders_->times(); }
  /// @return the decoders its copies share (to hold one back in a test, say)
  [[nodiscard]] decoder_pool& decoders() const noexcept { return *decoders_; }

  /// @brief A record's encoded image (an image file, read on this producer's thread, or an
  /// encoded Datum): staged into the batch.
  template <encoded_sample_record Record>
  void operator()(const Record& record, batch& to, const sample_context& context) {
    const encoded_sample image = reader_(record);
    to.stage(context.index, image.bytes, context.rng(), image.key, image.label);
  }

 private:
  image_transform_options transform_;
  nvjpeg_batcher_options options_;
  record_shape shape_;
  encoded_sample_reader reader_;
  std::shared_ptr<decoder_pool> decoders_;  // every copy's, and every batch's
};

}  // namespace crema::cuda
