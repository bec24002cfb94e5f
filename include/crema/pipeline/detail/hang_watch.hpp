#pragma once

#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/library_inline.hpp>
#include <crema/core/error.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

namespace crema::detail {

// What a producer is doing: waiting (for a slot, for its turn to claim, or done), or busy with one
// record of a batch.
enum class producer_phase : std::uint8_t { waiting, reading, transforming, finishing };

inline const char* phase_name(producer_phase phase) noexcept {
  switch (phase) {
    case producer_phase::reading:
      return "reading";
    case producer_phase::transforming:
      return "transforming";
    case producer_phase::finishing:
      return "finishing the batch of";
    case producer_phase::waiting:
      break;
  }
  return "waiting at";
}

// One producer's progress: written by that producer, a relaxed store or two per record and two
// per phase of a batch (a cache line of its own, so no other producer's stores touch it); read by
// the watch. A record is told apart by its batch, phase, pass and position; the one case where two
// records in a row look alike, a last batch padded with copies of its single record, can be
// taken for hung only if those copies together take `hang_timeout`.
struct alignas(64) producer_progress {
  // Starting a phase of batch `ticket`.
  void begin(producer_phase now, std::uint64_t ticket) noexcept {
    batch.store(ticket, std::memory_order_relaxed);
    phase.store(now, std::memory_order_relaxed);
  }
  // Starting on the record at (`pass`, `at`).
  void record(std::uint64_t pass, std::uint64_t at) noexcept {
    epoch.store(pass, std::memory_order_relaxed);
    position.store(at, std::memory_order_relaxed);
  }
  // Starting on the record at `at` of the pass last given.
  void record(std::uint64_t at) noexcept { position.store(at, std::memory_order_relaxed); }

  std::atomic<std::uint64_t> batch{0};
  std::atomic<producer_phase> phase{producer_phase::waiting};
  std::atomic<std::uint64_t> epoch{0};
  std::atomic<std::uint64_t> position{0};
};

// A producer found busy with one record for the watch's timeout.
struct hung_producer {
  std::size_t producer = 0;
  producer_phase phase = producer_phase::waiting;
  std::uint64_t epoch = 0;
  std::uint64_t position = 0;
  std::chrono::milliseconds busy{0};
};

// Names a source or transform that hangs. Consumers waiting for a batch look now and then (every
// slice of their wait); a producer busy with the same record since a look `timeout` ago is hung.
// Nothing on a batch's path but the producers' stores. Thread-safe: one consumer looks at a time.
class hang_watch {
 public:
  using clock = std::chrono::steady_clock;

  hang_watch(std::size_t producers, std::chrono::milliseconds timeout);

  [[nodiscard]] producer_progress& of(std::size_t producer) noexcept { return progress_[producer]; }
  [[nodiscard]] bool watches() const noexcept {
    return timeout_ != std::chrono::milliseconds::max();
  }

  // A producer busy with one record for `timeout`, if one is.
  std::optional<hung_producer> look(clock::time_point now);

 private:
  struct seen {
    std::uint64_t batch = ~std::uint64_t{0};
    producer_phase phase = producer_phase::waiting;
    std::uint64_t epoch = 0;
    std::uint64_t position = 0;
    clock::time_point since{};
    [[nodiscard]] bool same_record(const seen& other) const noexcept {
      return batch == other.batch && phase == other.phase && epoch == other.epoch &&
             position == other.position;
    }
  };

  std::vector<producer_progress> progress_;
  std::mutex mutex_;
  std::vector<seen> seen_;  // under mutex_
  const std::chrono::milliseconds timeout_;
};

// What a blocking pull throws once the watch has found `hung`.
[[noreturn]] void fail_hung(const hung_producer& hung, std::string_view source_key,
                            std::chrono::milliseconds timeout);

}  // namespace crema::detail

#if CREMA_CORE_IN_HEADERS
#include <crema/pipeline/detail/hang_watch_impl.hpp>
#endif
