#pragma once

#include <crema/core/error.hpp>
#include <crema/core/generator.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace crema {

/// @brief Where a source stands in its pass: the index (in this shard) of the next record.
using record_position = std::uint64_t;

/// @brief A sequence of records a pipeline reads, one pass (epoch) at a time.
///
/// - `next()` returns a pointer to the next record, or nullptr at the end of the pass; the record
///   stays valid until the next call to `next()` or `rewind()` (or for the source's lifetime when
///   `records_are_stable` is true, which lets the pipeline skip a copy).
/// - `rewind()` starts the next pass.
/// - `shard(rank, world)` keeps every record whose index in the pass is `rank` modulo `world`, so
///   `world` readers see disjoint parts whose union is the source; it rewinds.
/// - `position()` / `seek(position)` save and restore where the pass stands, to resume; a
///   position past the end of the pass is a `crema::config_error`, never a wrapped index.
/// - `key()` names the data (name + ":" + location) for sharing a reader through a
///   `source_registry`.
/// Sources are used by one thread at a time; the pipeline serializes its producers' pulls.
template <class Source>
concept record_source = std::move_constructible<Source> &&
    requires(Source& source, const Source& const_source, std::size_t rank, std::size_t world,
             record_position position) {
  typename Source::record_type;
  { Source::records_are_stable } -> std::convertible_to<bool>;
  { source.next() } -> std::same_as<const typename Source::record_type*>;
  source.rewind();
  source.shard(rank, world);
  { const_source.position() } -> std::same_as<record_position>;
  source.seek(position);
  { const_source.key() } -> std::convertible_to<std::string>;
};

namespace detail {

inline void check_shard(std::size_t rank, std::size_t world) {
  if (world == 0) fail<config_error>("source shard: world must be at least 1, got 0");
  if (rank >= world)
    fail<config_error>("source shard: rank {} is outside a world of {}", rank, world);
}

}  // namespace detail

/// @brief A source over records held in memory (a `std::vector<Record>`), read in order.
///
/// Its records stay where they are, so the pipeline refers to them instead of copying.
template <class Record>
class vector_source {
 public:
  using record_type = Record;
  static constexpr bool records_are_stable = true;

  /// @param records the records, owned by the source
  /// @param name    names the data for `key()` ("vector:<name>")
  explicit vector_source(std::vector<Record> records, std::string name = "memory")
      : records_(std::move(records)), name_(std::move(name)) {}

  [[nodiscard]] const Record* next() noexcept {
    const std::size_t index = rank_ + next_ * world_;
    if (index >= records_.size()) return nullptr;
    ++next_;
    return &records_[index];
  }
  void rewind() noexcept { next_ = 0; }
  void shard(std::size_t rank, std::size_t world) {
    detail::check_shard(rank, world);
    rank_ = rank;
    world_ = world;
    next_ = 0;
  }
  [[nodiscard]] record_position position() const noexcept { return next_; }
  /// @throws crema::config_error if `position` is past the end of this shard's pass
  void seek(record_position position) {
    if (position > size()) {
      detail::fail<config_error>(
          "vector_source: position {} is past the end of {} (shard {} of {} holds {} records)",
          position, key(), rank_, world_, size());
    }
    next_ = position;
  }
  [[nodiscard]] std::string key() const { return "vector:" + name_; }

  /// @return the number of records this shard yields in one pass
  [[nodiscard]] std::size_t size() const noexcept {
    return records_.size() > rank_ ? (records_.size() - rank_ + world_ - 1) / world_ : 0;
  }
  /// @return the record at `index` of the whole (unsharded) data
  [[nodiscard]] const Record& operator[](std::size_t index) const { return records_.at(index); }

 private:
  std::vector<Record> records_;
  std::string name_;
  std::size_t rank_ = 0;
  std::size_t world_ = 1;
  record_position next_ = 0;
};

/// @brief A source over any coroutine generator: each pass calls `make()` for a new one.
///
/// A record is the generator's own value, valid until the next `next()` (the generator resumes
/// only then, so an exception it throws belongs to the record asked for, and the one before is
/// never lost). Sharding skips the records of other ranks; `seek` starts a new pass and skips to
/// the position.
/// @tparam Record the record type the generator yields
template <class Record>
class generator_source {
 public:
  using record_type = Record;
  static constexpr bool records_are_stable = false;

  /// @param make a callable returning a `crema::generator<Record>`
  /// @param name names the data for `key()` ("generator:<name>")
  template <class Make>
  explicit generator_source(Make make, std::string name = "generator")
      : make_(std::move(make)), name_(std::move(name)) {}

  generator_source(generator_source&&) noexcept = default;
  generator_source& operator=(generator_source&&) noexcept = default;

  [[nodiscard]] const Record* next() {
    if (!started_) start();
    for (;;) {
      if (taken_) {  // the generator computes the record asked for now, not one call ahead
        taken_ = false;
        ++current_;
      }
      if (current_ == generation_.end()) return nullptr;
      const std::uint64_t index = index_++;
      taken_ = true;
      if (index % world_ == rank_) {
        ++position_;
        return &*current_;
      }
    }
  }
  void rewind() { started_ = false; }
  void shard(std::size_t rank, std::size_t world) {
    detail::check_shard(rank, world);
    rank_ = rank;
    world_ = world;
    rewind();
  }
  [[nodiscard]] record_position position() const noexcept { return started_ ? position_ : 0; }
  /// @throws crema::config_error if the pass ends before `position`
  void seek(record_position position) {
    rewind();
    start();
    while (position_ < position) {
      if (next() == nullptr) {
        detail::fail<config_error>(
            "generator_source: position {} is past the end of {} (the pass has {} records)",
            position, key(), position_);
      }
    }
  }
  [[nodiscard]] std::string key() const { return "generator:" + name_; }

 private:
  using generator_type = generator<Record>;

  void start() {
    started_ = false;
    index_ = 0;
    position_ = 0;
    taken_ = false;
    generation_ = make_();
    current_ = generation_.begin();
    started_ = true;
  }

  std::function<generator_type()> make_;
  std::string name_;
  generator_type generation_;
  typename generator_type::iterator current_;
  std::size_t rank_ = 0;
  std::size_t world_ = 1;
  std::uint64_t index_ = 0;
  record_position position_ = 0;
  bool started_ = false;
  bool taken_ = false;  // `current_` was handed out (or skipped): advance before reading again
};

static_assert(record_source<vector_source<int>>);
static_assert(record_source<generator_source<int>>);

}  // namespace crema
