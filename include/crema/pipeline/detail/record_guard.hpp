#pragma once

#include <crema/core/error.hpp>

#include <cstddef>
#include <cstring>
#include <span>

namespace crema::detail {

// Catches a transform that writes past the record a batch handed it. When a record is handed out
// (`arm`), the element after it, the next record's first or a spare element after the last, gets
// a marker; once the transform is done (`check`, which the producer calls through the batch's
// `after_record`), the marker must be there still: a transform that wrote one element too many,
// the usual slip, is refused, naming the record, before the batch is delivered. A write that
// skips the element after the record, or writes the marker's own bytes, is not seen. Not
// thread-safe: the batch's producer alone uses it.
template <class T>
class record_guard {
 public:
  // Marks `all[after]`, the element after record `record`, if there is one.
  void arm(std::span<T> all, std::size_t after, std::size_t record) noexcept {
    marked_ = nullptr;
    if (after >= all.size()) return;
    marked_ = all.data() + after;
    record_ = record;
    std::memset(static_cast<void*>(marked_), marker_byte, sizeof(T));
  }
  // Throws length_error naming `who` if the transform of `record` overwrote the marker.
  void check(const char* who, std::size_t record, std::size_t elements) {
    if (marked_ == nullptr || record_ != record) return;
    unsigned char bytes[sizeof(T)];
    std::memcpy(bytes, static_cast<const void*>(marked_), sizeof(T));
    marked_ = nullptr;
    for (const unsigned char byte : bytes) {
      if (byte != marker_byte) {
        fail<length_error>(
            "{}: the transform of record {} wrote past its {} elements (the element after it "
            "changed)",
            who, record, elements);
      }
    }
  }

 private:
  static constexpr unsigned char marker_byte = 0xa5;
  T* marked_ = nullptr;
  std::size_t record_ = 0;
};

}  // namespace crema::detail
