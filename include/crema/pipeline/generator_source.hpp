#pragma once

#include <crema/core/error.hpp>
#include <crema/core/generator.hpp>
#include <crema/pipeline/source.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

namespace crema {

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

static_assert(record_source<generator_source<int>>);

}  // namespace crema
