#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/error.hpp>
#include <crema/pipeline/detail/checked_options.hpp>
#include <crema/pipeline/double_buffered_pipeline.hpp>
#include <crema/pipeline/pipeline_options.hpp>
#include <crema/pipeline/source.hpp>
#include <crema/pipeline/stats.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

namespace crema {

/// @brief A source that says how many records one pass of its shard holds (`size()`): every
/// crema source over numbered records does.
template <class Source>
concept sized_record_source = record_source<Source> && requires(const Source& source) {
  { source.size() } -> std::convertible_to<std::size_t>;
};

/// @brief How an `epoch_loader` reads.
struct epoch_loader_options {
  std::size_t batch_size = 1;
  std::size_t threads = 1;   ///< producers, one a thread
  std::size_t prefetch = 0;  ///< batch slots (0: the pipeline's default, `pipeline_options`)
  std::uint64_t seed = 0;    ///< keys the augmentations (and the shuffle, which is the source's)
  /// The last batch of each epoch when the records run out before it is full.
  partial_batch last_batch = partial_batch::keep;
  std::chrono::milliseconds stall_timeout{std::chrono::seconds(60)};
  std::chrono::milliseconds hang_timeout{std::chrono::seconds(60)};
};

/// @brief Where an `epoch_loader` stands: batch `batch` of epoch `epoch` comes next. A small value
/// to save at a checkpoint and give back to `seek`.
struct loader_position {
  std::uint64_t epoch = 0;
  std::uint64_t batch = 0;  ///< within the epoch: `batches_per_epoch()` once the epoch is over

  friend bool operator==(const loader_position&, const loader_position&) = default;
};

/// @brief A training loop's view of a pipeline: epochs of a known number of batches, started
/// lazily, positioned anywhere.
///
/// What a loop that counts epochs (PyTorch's, crema's Python `Loader`) needs of the pipeline:
/// `batches_per_epoch()` batches per epoch, none holding records of two epochs (the last one
/// short, dropped or padded as `last_batch` says), batch i of epoch e the same bytes on every run
/// and whatever `threads` is (the pipeline is ordered; augmentations are keyed by seed, epoch
/// and position). The producers start on the first `next_for` and keep prefetching across the
/// end of an epoch into the next, so that a loop's next epoch starts with batches ready. Asking
/// for another place than the one the pipeline is heading for (`start_epoch` of another epoch,
/// `seek`, or an epoch left before its end) stops the producers and starts them again there,
/// through `pipeline_options::resume_from`, on a fresh source from `make_source`.
///
/// Sharding and shuffling are the source's: `make_source` returns it sharded (with
/// `shard_balance`, so that every rank has as many batches) and shuffled as wanted, at its first
/// pass. One thread at a time; leases may outlive the loader.
/// @tparam Source    a `sized_record_source` (`size()`: the records of its shard's pass)
/// @tparam Transform a batch transform (`batch_transform`) for its records
template <sized_record_source Source, class Transform>
class epoch_loader {
 public:
  using pipeline_type = double_buffered_pipeline<Source, Transform>;
  using lease_type = typename pipeline_type::lease_type;
  using pull_result_type = typename pipeline_type::pull_result_type;

  /// @param make_source makes the source at its first pass, sharded and shuffled; called once
  ///                    here (to count the records) and at every start of the producers
  /// @throws crema::config_error naming the source if a pass of its shard holds no record, or
  ///         fewer than a batch while the last batch is dropped; and for the counts the pipeline
  ///         refuses, when it starts
  epoch_loader(std::function<Source()> make_source, Transform transform,
               epoch_loader_options options)
      : make_source_(std::move(make_source)), transform_(std::move(transform)), options_(options) {
    if (options_.batch_size == 0) {
      detail::fail<config_error>("epoch_loader: batch_size must be at least 1, got 0");
    }
    const Source first = make_source_();
    records_ = static_cast<std::uint64_t>(first.size());
    key_ = std::string(first.key());
    if (records_ == 0) {
      detail::fail<config_error>("epoch_loader: {} holds no record in this shard", key_);
    }
    batches_ = options_.last_batch == partial_batch::drop
                   ? records_ / options_.batch_size
                   : (records_ + options_.batch_size - 1) / options_.batch_size;
    if (batches_ == 0) {
      detail::fail<config_error>(
          "epoch_loader: {} holds {} records in this shard, fewer than a batch of {}, and the "
          "last batch is dropped",
          key_, records_, options_.batch_size);
    }
  }
  epoch_loader(const epoch_loader&) = delete;
  epoch_loader& operator=(const epoch_loader&) = delete;
  /// @brief Stops the producers and waits for them.
  ~epoch_loader() = default;

  /// @return the batches of one epoch
  [[nodiscard]] std::uint64_t batches_per_epoch() const noexcept { return batches_; }
  /// @return the records one epoch of the source's shard holds
  [[nodiscard]] std::uint64_t records_per_epoch() const noexcept { return records_; }
  /// @return the source's key
  [[nodiscard]] const std::string& key() const noexcept { return key_; }
  /// @return the options it was made with
  [[nodiscard]] const epoch_loader_options& options() const noexcept { return options_; }
  /// @return the batch slots: the most batches a caller can hold at once (`prefetch`, or the
  ///         pipeline's default for `threads`)
  [[nodiscard]] std::size_t slots() const noexcept {
    return options_.prefetch != 0 ? options_.prefetch
                                  : detail::default_prefetch({.producers = options_.threads,
                                                              .threads = options_.threads});
  }

  /// @return the batch that comes next
  [[nodiscard]] loader_position position() const noexcept { return next_; }
  /// @return whether the producers run
  [[nodiscard]] bool running() const noexcept { return pipe_ != nullptr; }

  /// @brief Makes `epoch` the one read, from its first batch. Nothing restarts when that is where
  /// the producers are heading (the epoch after the one just finished).
  void start_epoch(std::uint64_t epoch) { seek({epoch, 0}); }
  /// @brief Makes `position` the next batch (to resume from a saved `position()`).
  /// @throws crema::config_error if its batch is past the end of its epoch
  void seek(loader_position position) {
    if (position.batch > batches_) {
      detail::fail<config_error>("epoch_loader: batch {} is past the {} batches of an epoch of {}",
                                 position.batch, batches_, key_);
    }
    next_ = position;
  }

  /// @brief The next batch of the epoch, waiting for it until `timeout` at most; starts the
  /// producers (at `position()`) if they do not run or are heading elsewhere.
  /// @return `ready` and the batch; `end` once the epoch's batches were all delivered (until
  ///         `start_epoch`); `timeout`; `stopped` after `close()`
  /// @throws crema::pipeline_error from the pipeline (a failed record, a transform busy with one
  ///         record past `hang_timeout`, a consumer holding every slot), crema::config_error
  ///         from its options
  template <class Rep, class Period>
  [[nodiscard]] pull_result_type next_for(std::chrono::duration<Rep, Period> timeout) {
    return take([&](auto consumer) { return consumer.pull_for(timeout); });
  }
  /// @brief The next batch of the epoch, waiting as long as it takes (a pipeline's blocking
  /// `pull()`: a transform busy with one record past `hang_timeout` is an error naming it);
  /// empty at the epoch's end or after `close()`.
  [[nodiscard]] lease_type next() {
    return take([](auto consumer) {
             lease_type lease = consumer.pull();
             const pull_status status = lease ? pull_status::ready : pull_status::stopped;
             return pull_result_type{status, std::move(lease)};
           })
        .batch;
  }

  /// @brief Stops the producers and waits for them (leases stay valid); the next `next_for`
  /// returns `stopped`. Idempotent.
  void close() {
    closed_ = true;
    pipe_.reset();
  }
  /// @return the running pipeline's counters (all zero while it does not run)
  [[nodiscard]] pipeline_stats stats() const { return pipe_ ? pipe_->stats() : pipeline_stats{}; }

 private:
  // The next batch through `pull(consumer)`, the producers started where they must be, and the
  // batch checked to be the one due.
  template <class Pull>
  pull_result_type take(Pull&& pull) {
    if (closed_) return {pull_status::stopped, {}};
    if (next_.batch >= batches_) return {pull_status::end, {}};
    if (pipe_ == nullptr || heading_ != next_) start();
    pull_result_type result = pull(pipe_->consumer(0));
    if (result.status == pull_status::ready) {
      const std::uint64_t batch = result.batch.sequence() % batches_;
      if (result.batch.epoch() != next_.epoch || batch != next_.batch) {
        detail::fail<state_error>(
            "epoch_loader: batch {} of epoch {} came where batch {} of epoch {} was due ({})",
            batch, result.batch.epoch(), next_.batch, next_.epoch, key_);
      }
      ++next_.batch;
      heading_ = next_.batch < batches_ ? next_ : loader_position{next_.epoch + 1, 0};
    } else if (result.status != pull_status::timeout) {
      pipe_.reset();  // stopped from elsewhere: started again on the next call
    }
    return result;
  }

  void start() {
    pipe_.reset();  // the old producers stop before the new ones read
    pipeline_options options{
        .batch_size = options_.batch_size,
        .prefetch = options_.prefetch,
        .producers = options_.threads,
        .threads = options_.threads,
        .mode = pipeline_mode::repeat,
        .last_batch = options_.last_batch,
        .batches_end_with_pass = true,
        .ordered = true,
        .seed = options_.seed,
        .stall_timeout = options_.stall_timeout,
        .hang_timeout = options_.hang_timeout,
        .resume_from = pipeline_position{next_.epoch * batches_ + next_.batch, next_.epoch,
                                         next_.batch * options_.batch_size}};
    pipe_ = std::make_unique<pipeline_type>(make_source_(), transform_, options);
    heading_ = next_;
  }

  std::function<Source()> make_source_;
  Transform transform_;
  epoch_loader_options options_;
  std::string key_;
  std::uint64_t records_ = 0;
  std::uint64_t batches_ = 0;
  loader_position next_;     // what the caller gets next
  loader_position heading_;  // what the running pipeline delivers next
  bool closed_ = false;
  std::unique_ptr<pipeline_type> pipe_;
};

}  // namespace crema
