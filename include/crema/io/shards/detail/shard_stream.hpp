#pragma once

#include <crema/core/error.hpp>
#include <crema/io/shards/shard_file.hpp>
#include <crema/pipeline/keyed_permutation.hpp>
#include <crema/pipeline/sample_context.hpp>
#include <crema/pipeline/source.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace crema {

/// @brief How a source that streams its shards reads them.
struct shard_stream_options {
  /// Samples held back: each `next()` hands over one drawn from them at random (keyed by seed,
  /// epoch and position) and reads the next sample in its place, as WebDataset's `shuffle(n)`
  /// does. 0: the shards' own order. Only with `shuffle(seed)`.
  std::size_t shuffle_buffer = 0;
};

namespace detail {

// What the sources that read shards without an index share: the shards split among the ranks
// (shard by shard, in an order keyed by (seed, epoch) when shuffled), each of a rank's shards
// read from its start to its end as it is scanned (a header, then the next: sequential reads,
// which a storage's cache turns into one request a chunk), a shuffle buffer, a pass of a fixed
// size when asked (every rank as many samples: short ranks read their shards again, long ones
// stop), and a position resumed by replaying the pass's draws (headers read again, no data).
// `Derived` gives `source_name`, `key_prefix`, `unit`, `Scanner scan(const shard_file&) const`
// (whose `next()` gives the shard's next `Entry` or nothing) and
// `Record record(std::shared_ptr<const shard_set>, std::size_t shard, Entry) const`.
template <class Derived, class Entry, class Record, class Scanner>
class shard_stream {
 public:
  using record_type = Record;
  static constexpr bool records_are_stable = false;

  /// @return the next sample of this rank's pass (valid until the next call), or nullptr at its
  ///         end; nothing of it is read yet but where its members lie
  /// @throws crema::format_error naming the shard and the byte of a malformed header;
  ///         crema::config_error naming a shard that holds no sample; crema::io_error
  [[nodiscard]] const Record* next() {
    if (pass_size_ != 0 && position_ >= pass_size_) return nullptr;
    std::optional<std::pair<std::size_t, Entry>> taken;
    if (buffering()) {
      // The buffer is filled from this round of the rank's shards, and drained before a pass
      // longer than them starts the next round: a pass of the shards' size reads each once.
      fill_buffer(false);
      if (buffer_.empty()) fill_buffer(true);
      if (buffer_.empty()) return nullptr;
      sample_rng draw(*seed_, epoch_, position_);
      const auto pick = static_cast<std::size_t>(draw.below(buffer_.size()));
      taken = std::move(buffer_[pick]);
      if (auto more = read_entry(false)) {
        buffer_[pick] = std::move(*more);
      } else {
        buffer_[pick] = std::move(buffer_.back());
        buffer_.pop_back();
      }
    } else {
      taken = read_entry(true);
      if (!taken) return nullptr;
    }
    current_ =
        static_cast<const Derived&>(*this).record(shards_, taken->first, std::move(taken->second));
    ++position_;
    return &current_;
  }

  /// @brief Reads the shards in an order keyed by (seed, epoch) and, with a shuffle buffer,
  /// draws the samples from it; the pass starts again.
  Derived& shuffle(std::uint64_t seed) {
    seed_ = seed;
    begin_pass();
    return static_cast<Derived&>(*this);
  }
  /// @brief Keeps every `world`-th shard of the pass's order, from `rank`: the ranks read
  /// disjoint shards that together are all of them. The pass starts again.
  /// @throws crema::config_error if `world` is 0, `rank` is not below it, or there are fewer
  ///         shards than ranks (a rank would read nothing)
  void shard(std::size_t rank, std::size_t world) {
    check_shard(rank, world);
    if (world > shards_->size()) {
      fail<config_error>(
          "{}: rank {} of {} gets no shard: there are {} shards (give at least "
          "a shard a rank)",
          Derived::source_name, rank, world, shards_->size());
    }
    rank_ = rank;
    world_ = world;
    begin_pass();
  }
  /// @brief Makes every pass of this rank exactly `samples` long (0: its shards once, however
  /// many samples they hold): a rank whose shards hold fewer reads them again from the first
  /// (a few samples twice), one whose shards hold more stops there. Given the same number on
  /// every rank, every rank makes as many batches, as a data-parallel job needs. The pass starts
  /// again.
  void pass_size(std::uint64_t samples) {
    pass_size_ = samples;
    begin_pass();
  }
  /// @return the samples of a pass: its pass size, or 0 while none is set (a stream's length is
  ///         not known before it is read; `epoch_loader` needs a pass size)
  [[nodiscard]] std::size_t size() const noexcept { return static_cast<std::size_t>(pass_size_); }
  /// @brief Starts the next pass (the next epoch's order, when shuffled).
  void rewind() { set_epoch(epoch_ + 1); }
  /// @brief Makes `epoch` the pass being read, from its start.
  void set_epoch(std::uint64_t epoch) {
    epoch_ = epoch;
    begin_pass();
  }
  /// @return the pass being read
  [[nodiscard]] std::uint64_t epoch() const noexcept { return epoch_; }
  /// @return the samples this pass has handed over
  [[nodiscard]] record_position position() const noexcept { return position_; }
  /// @brief Goes to `position` of the pass being read, by reading the pass again from its start
  /// to there (the headers and the draws, none of the samples' data).
  /// @throws crema::config_error naming the position if the pass ends first
  void seek(record_position position) {
    begin_pass();
    while (position_ < position) {
      if (next() == nullptr) {
        fail<config_error>("{}: position {} is past the end of {}'s pass, which holds {} {}s",
                           Derived::source_name, position, key(), position_, Derived::unit);
      }
    }
  }

  /// @return the format, the first shard's path and the number of shards after it
  [[nodiscard]] std::string key() const { return shards_key(Derived::key_prefix, *shards_); }
  /// @return what errors name a sample by
  [[nodiscard]] std::string record_key(const Record& record) const { return record.name(); }
  /// @return the shards' paths
  [[nodiscard]] const std::vector<std::string>& shards() const noexcept { return shards_->paths(); }
  /// @return where its shards named by URL are read from (none where it was given none)
  [[nodiscard]] const std::shared_ptr<const shard_storage>& storage() const noexcept {
    return shards_->storage();
  }
  /// @return the shards this rank reads in this pass, in order
  [[nodiscard]] const std::vector<std::size_t>& rank_shards() const noexcept { return mine_; }

 protected:
  shard_stream(std::vector<std::string> paths, std::shared_ptr<const shard_storage> storage,
               shard_stream_options options)
      : shards_(std::make_shared<const shard_set>(std::move(paths), std::move(storage))),
        options_(options) {
    if (shards_->size() == 0) fail<config_error>("{}: no shard given", Derived::source_name);
    begin_pass();
  }

 private:
  [[nodiscard]] bool buffering() const noexcept {
    return seed_.has_value() && options_.shuffle_buffer > 1;
  }

  // The pass's shards for this rank, and nothing read of them yet.
  void begin_pass() {
    const std::size_t count = shards_->size();
    mine_.clear();
    std::optional<keyed_permutation> order;
    if (seed_) order.emplace(epoch_permutation(count, *seed_ ^ shard_order_key, epoch_));
    for (std::size_t at = rank_; at < count; at += world_) {
      mine_.push_back(order ? static_cast<std::size_t>((*order)(at)) : at);
    }
    next_shard_ = 0;
    file_.reset();
    scanner_.reset();
    buffer_.clear();
    position_ = 0;
  }

  void fill_buffer(bool next_round) {
    while (buffer_.size() < options_.shuffle_buffer) {
      auto more = read_entry(next_round);
      if (!more) return;
      buffer_.push_back(std::move(*more));
      next_round = false;
    }
  }

  // The rank's next sample in its shards' order, moving from shard to shard; at the end of its
  // shards nothing, or with a pass size and `next_round`, their first sample again.
  std::optional<std::pair<std::size_t, Entry>> read_entry(bool next_round) {
    for (;;) {
      if (scanner_) {
        if (auto entry = scanner_->next()) {
          shard_had_sample_ = true;
          return std::pair<std::size_t, Entry>{current_shard_, std::move(*entry)};
        }
        if (!shard_had_sample_) {
          fail<config_error>("{}: shard {} holds no {}", Derived::source_name,
                             shards_->path(current_shard_), Derived::unit);
        }
        scanner_.reset();
        file_.reset();
      }
      if (next_shard_ == mine_.size()) {
        if (pass_size_ == 0 || !next_round) return std::nullopt;
        // A pass longer than the rank's shards: read them again. Each holds a sample (an empty
        // one is an error above), so this never loops without reading.
        next_shard_ = 0;
      }
      current_shard_ = mine_[next_shard_++];
      file_ = shards_->open(current_shard_);
      scanner_.emplace(static_cast<const Derived&>(*this).scan(*file_));
      shard_had_sample_ = false;
    }
  }

  static constexpr std::uint64_t shard_order_key = 0x2545f4914f6cdd1dULL;

  std::shared_ptr<const shard_set> shards_;  // shared by copies and by records
  shard_stream_options options_;
  std::optional<std::uint64_t> seed_;
  std::uint64_t epoch_ = 0;
  std::size_t rank_ = 0;
  std::size_t world_ = 1;
  std::uint64_t pass_size_ = 0;
  std::vector<std::size_t> mine_;  // this pass's shards for this rank
  std::size_t next_shard_ = 0;     // into mine_
  std::size_t current_shard_ = 0;
  std::shared_ptr<const shard_file> file_;  // what scanner_ reads
  std::optional<Scanner> scanner_;
  bool shard_had_sample_ = false;
  std::vector<std::pair<std::size_t, Entry>> buffer_;
  record_position position_ = 0;
  Record current_;
};

}  // namespace detail
}  // namespace crema
