#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <variant>

#include <fmt/core.h>

// The messages an mpi_reducer's ranks send each other, on the reducer's own communicator, and
// their checks: whatever bytes a rank receives, it uses them only once they have been found to be
// a message of the protocol, from the rank that should send it. Another rank may be buggy, of
// another build, or hostile.
//
//   tag 1, view:    every rank to rank 0 before each operation: what it is about to do
//   tag 2, verdict: rank 0 to every rank: agreed, or who disagreed, went silent or sent nonsense
//   tag 3, data:    elements of T, exactly as many as both ends derive from the views they agreed
//                   on (the size of a received data message is checked against that)
namespace crema::mpi::detail {

inline constexpr int view_tag = 1;
inline constexpr int verdict_tag = 2;
inline constexpr int data_tag = 3;

// The operations the ranks agree on, as a view names them.
enum class reducer_operation : std::uint64_t {
  construct = 1,
  broadcast,
  reduce_sum,
  reduce_average,
  allreduce,
};

// What a rank says it is about to do; all ranks must say the same.
struct reducer_view {
  std::uint64_t op = 0;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint64_t root = 0;
  std::uint64_t step = 0;
  std::uint64_t elements = 0;
  std::uint64_t local = 0;
  std::uint64_t element_bytes = 0;
  friend bool operator==(const reducer_view&, const reducer_view&) = default;
};

// Rank 0's answer to the views of one operation.
enum class verdict_kind : std::uint64_t {
  agreed = 0,
  disagrees = 1,  // `rank`'s view (`theirs`) differs from rank 0's (`zero`)
  silent = 2,     // `rank` did not send its view in time
  malformed = 3,  // `rank` sent `bytes` bytes that are not a view
};
struct reducer_verdict {
  verdict_kind kind = verdict_kind::agreed;
  std::uint64_t rank = 0;
  std::uint64_t bytes = 0;
  reducer_view zero{};
  reducer_view theirs{};
};

// A view decoded from the bytes a rank sent, or what is wrong with them.
[[nodiscard]] inline std::variant<reducer_view, std::string> decode_view(
    std::span<const std::byte> bytes) {
  if (bytes.size() != sizeof(reducer_view)) {
    return fmt::format("{} bytes where a view has {}", bytes.size(), sizeof(reducer_view));
  }
  reducer_view view;
  std::memcpy(&view, bytes.data(), sizeof view);
  return view;
}

// A verdict decoded from the bytes rank 0 sent to a communicator of `ranks` ranks, or what is
// wrong with them: its size, its kind, or a rank that is not in the communicator (or is rank 0
// itself, which has nobody to disagree with but itself).
[[nodiscard]] inline std::variant<reducer_verdict, std::string> decode_verdict(
    std::span<const std::byte> bytes, std::size_t ranks) {
  if (bytes.size() != sizeof(reducer_verdict)) {
    return fmt::format("{} bytes where a verdict has {}", bytes.size(), sizeof(reducer_verdict));
  }
  reducer_verdict verdict;
  std::memcpy(&verdict, bytes.data(), sizeof verdict);
  const auto kind = static_cast<std::uint64_t>(verdict.kind);
  if (kind > static_cast<std::uint64_t>(verdict_kind::malformed)) {
    return fmt::format("a verdict of unknown kind {}", kind);
  }
  if (verdict.kind != verdict_kind::agreed && (verdict.rank == 0 || verdict.rank >= ranks)) {
    return fmt::format("a verdict naming rank {}, not another rank of {}", verdict.rank, ranks);
  }
  return verdict;
}

}  // namespace crema::mpi::detail
