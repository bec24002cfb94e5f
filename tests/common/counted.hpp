#pragma once

#include <atomic>
#include <cstdint>

namespace crema::test {

/// An item that counts how often one is constructed and destroyed, to prove that slots are made
/// once and reused.
struct counted {
  static inline std::atomic<std::int64_t> constructed{0};
  static inline std::atomic<std::int64_t> destroyed{0};
  static void reset() {
    constructed = 0;
    destroyed = 0;
  }

  counted() noexcept { ++constructed; }
  counted(const counted& other) noexcept : value(other.value) { ++constructed; }
  counted& operator=(const counted&) noexcept = default;
  ~counted() { ++destroyed; }

  std::int64_t value = 0;
};

}  // namespace crema::test
