#pragma once

#include <crema/pipeline/source.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>

namespace crema {
namespace detail {
struct sample_context_keys;
}  // namespace detail

/// @brief A counter-based random generator: the numbers depend only on the key it was made
/// from (seed, epoch, position in the pass), never on which producer, thread or schedule draws
/// them. So an augmentation that draws only from it gives the same bytes however the pipeline is
/// set up.
///
/// SplitMix64: the key is mixed into a 64-bit state, each draw adds the golden-ratio increment and
/// mixes again. A `UniformRandomBitGenerator`, so the standard distributions accept it (their
/// algorithms are the standard library's, so their draws may differ between standard libraries;
/// `below`, `uniform` and `bernoulli` are crema's own and the same everywhere). Cheap to copy,
/// 8 bytes; not thread-safe (copy it per thread).
class sample_rng {
 public:
  using result_type = std::uint64_t;

  /// @brief The generator keyed by `(seed, epoch, position)`.
  constexpr sample_rng(std::uint64_t seed, std::uint64_t epoch, std::uint64_t position) noexcept
      : state_(mix(mix(mix(seed + golden) ^ (epoch + 2 * golden)) ^ (position + 3 * golden))) {}

  static constexpr result_type min() noexcept { return 0; }
  static constexpr result_type max() noexcept { return std::numeric_limits<result_type>::max(); }

  /// @return the next 64 random bits
  constexpr result_type operator()() noexcept {
    state_ += golden;
    return mix(state_);
  }
  /// @return a number uniform in [0, bound), without modulo bias (draws below 2^64 mod bound
  ///         are drawn again); 0 if `bound` is 0
  constexpr std::uint64_t below(std::uint64_t bound) noexcept {
    if (bound == 0) return 0;
    const std::uint64_t threshold = (0 - bound) % bound;
    for (;;) {
      const std::uint64_t draw = (*this)();
      if (draw >= threshold) return draw % bound;
    }
  }
  /// @return a number uniform in [0, 1), with 53 random bits
  constexpr double uniform() noexcept { return static_cast<double>((*this)() >> 11) * 0x1.0p-53; }
  /// @return a number uniform in [low, high)
  constexpr double uniform(double low, double high) noexcept {
    return low + (high - low) * uniform();
  }
  /// @return true with probability `p`
  constexpr bool bernoulli(double p) noexcept { return uniform() < p; }

 private:
  static constexpr std::uint64_t golden = 0x9e3779b97f4a7c15ULL;

  static constexpr std::uint64_t mix(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  std::uint64_t state_;
};

/// @brief What a transform learns about the record it is given.
///
/// `epoch` and `position` come from the claim, made in source order whatever the schedule, so
/// `rng()` is the same for a record on every run with the same seed. Valid during the transform
/// call only.
struct sample_context {
  std::uint64_t seed = 0;        ///< `pipeline_options::seed`
  std::uint64_t epoch = 0;       ///< the pass over the source the record belongs to
  record_position position = 0;  ///< the record's position in its pass (in this shard)
  std::size_t index = 0;         ///< the record's index in its batch
  std::size_t producer = 0;      ///< the producer running the transform
  std::size_t consumer = 0;      ///< the consumer the batch is for
  std::uint64_t sequence = 0;    ///< the batch's number among that consumer's batches

  /// @return the record's generator, keyed by (seed, epoch, position)
  [[nodiscard]] constexpr sample_rng rng() const noexcept { return {seed, epoch, position}; }
  /// @return the source's key for the record (`record_key`), or an empty string for sources
  ///         without keys; asks the source, which may allocate
  [[nodiscard]] std::string key() const {
    return key_of_ != nullptr ? key_of_(source_, record_) : std::string();
  }

 private:
  friend struct detail::sample_context_keys;
  // How to ask the source for the record's key, on demand (set by the pipeline).
  std::string (*key_of_)(const void* source, const void* record) = nullptr;
  const void* source_ = nullptr;
  const void* record_ = nullptr;
};

namespace detail {

// The pipeline's way to let a sample context ask its source for keys.
struct sample_context_keys {
  static void attach(sample_context& context, const void* source,
                     std::string (*key_of)(const void*, const void*)) noexcept {
    context.source_ = source;
    context.key_of_ = key_of;
  }
  static void point_at(sample_context& context, const void* record) noexcept {
    context.record_ = record;
  }
};

}  // namespace detail

/// @brief Where a batch object is made: which consumer and slot it serves, and how many records
/// it holds at most. A batch-level transform's `make_batch` gets it once per slot.
struct batch_context {
  std::size_t consumer = 0;    ///< the consumer the slot belongs to (its device, for one)
  std::size_t slot = 0;        ///< the slot's index among that consumer's `prefetch`
  std::size_t batch_size = 0;  ///< records per batch
};

/// @brief What a filled batch holds, as a batch object's `finish` and the consumer see it.
struct batch_info {
  std::size_t consumer = 0;            ///< the consumer it is for
  std::size_t size = 0;                ///< records in it (the last batch of a pass may be short)
  std::uint64_t sequence = 0;          ///< its number among the consumer's batches (0, 1, 2, ...)
  std::uint64_t epoch = 0;             ///< the pass of its first record
  record_position first_position = 0;  ///< the position of its first record in that pass
  /// Records at its end that repeat its first ones (`partial_batch::pad`); 0 otherwise.
  std::size_t padding = 0;
};

}  // namespace crema
