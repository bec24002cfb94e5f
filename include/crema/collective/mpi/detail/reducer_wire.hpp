#pragma once

#include <crema/core/detail/fmt.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <variant>

// The messages an mpi_reducer's ranks send each other, on the reducer's own communicator, and
// their checks: whatever bytes a rank receives, it uses them only once they have been found to be
// a message of the protocol, from the rank that should send it. Another rank may be buggy, of
// another build, or hostile.
//
//   tag 1, view:    every rank to rank 0 before each operation: what it is about to do
//   tag 2, verdict: rank 0 to every rank: agreed, or who disagreed, went silent or sent nonsense
//   tag 3, data:    elements of T, exactly as many as both ends derive from the views they agreed
//                   on (the size of a received data message is checked against that)
//   tag 4, failure: from a rank that gave up on another, to every other rank, so that all of them
//                   name the rank at fault rather than the neighbour that stopped answering
//   tag 5, query:   empty: "whom do you wait for?", from a rank that waited too long for this one
//   tag 6, reply:   the answer, from a rank waiting inside the reducer (a rank that is stopped,
//                   gone or busy outside it answers nothing, which is how it is found)
namespace crema::mpi::detail {

inline constexpr int reducer_view_tag = 1;
inline constexpr int reducer_verdict_tag = 2;
inline constexpr int reducer_data_tag = 3;
inline constexpr int reducer_failure_tag = 4;
inline constexpr int reducer_query_tag = 5;
inline constexpr int reducer_reply_tag = 6;

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

// A rank gave up on `rank` (silent, gone, or sending nonsense) in operation `step`.
struct failure_notice {
  std::uint64_t rank = 0;
  std::uint64_t step = 0;
};

// A message of type `Message` copied out of `bytes`, or what is wrong with them: their size.
// `what` names the message ("a view").
template <class Message>
[[nodiscard]] std::variant<Message, std::string> decode_exact(std::span<const std::byte> bytes,
                                                              const char* what) {
  if (bytes.size() != sizeof(Message)) {
    return crema::detail::format("{} bytes where {} has {}", bytes.size(), what, sizeof(Message));
  }
  Message message;
  std::memcpy(&message, bytes.data(), sizeof message);
  return message;
}

// A failure notice decoded from the bytes a rank sent to a communicator of `ranks` ranks, or what
// is wrong with them.
[[nodiscard]] inline std::variant<failure_notice, std::string> decode_failure(
    std::span<const std::byte> bytes, std::size_t ranks) {
  auto decoded = decode_exact<failure_notice>(bytes, "a failure notice");
  const auto* notice = std::get_if<failure_notice>(&decoded);
  if (notice != nullptr && notice->rank >= ranks) {
    return crema::detail::format("a failure notice naming rank {}, not a rank of {}", notice->rank,
                                 ranks);
  }
  return decoded;
}

// Whom a rank waits for in operation `step`: a rank, nobody, or any rank (in a collective, where
// MPI chooses who sends to whom).
inline constexpr std::int64_t waits_for_nobody = -1;
inline constexpr std::int64_t waits_for_anyone = -2;
struct waiting_reply {
  std::int64_t waits_for = -1;
  std::uint64_t step = 0;
};

// A reply decoded from the bytes a rank sent to a communicator of `ranks` ranks, or what is wrong
// with them.
[[nodiscard]] inline std::variant<waiting_reply, std::string> decode_reply(
    std::span<const std::byte> bytes, std::size_t ranks) {
  auto decoded = decode_exact<waiting_reply>(bytes, "a reply");
  const auto* reply = std::get_if<waiting_reply>(&decoded);
  if (reply != nullptr &&
      (reply->waits_for < waits_for_anyone ||
       (reply->waits_for >= 0 && static_cast<std::uint64_t>(reply->waits_for) >= ranks))) {
    return crema::detail::format("a reply naming rank {}, not a rank of {}", reply->waits_for,
                                 ranks);
  }
  return decoded;
}

// A view decoded from the bytes a rank sent, or what is wrong with them.
[[nodiscard]] inline std::variant<reducer_view, std::string> decode_view(
    std::span<const std::byte> bytes) {
  return decode_exact<reducer_view>(bytes, "a view");
}

// A verdict decoded from the bytes rank 0 sent to a communicator of `ranks` ranks, or what is
// wrong with them: its size, its kind, or a rank that is not in the communicator (or is rank 0
// itself, which has nobody to disagree with but itself).
[[nodiscard]] inline std::variant<reducer_verdict, std::string> decode_verdict(
    std::span<const std::byte> bytes, std::size_t ranks) {
  auto decoded = decode_exact<reducer_verdict>(bytes, "a verdict");
  const auto* verdict = std::get_if<reducer_verdict>(&decoded);
  if (verdict == nullptr) return decoded;
  const auto kind = static_cast<std::uint64_t>(verdict->kind);
  if (kind > static_cast<std::uint64_t>(verdict_kind::malformed)) {
    return crema::detail::format("a verdict of unknown kind {}", kind);
  }
  if (verdict->kind != verdict_kind::agreed && (verdict->rank == 0 || verdict->rank >= ranks)) {
    return crema::detail::format("a verdict naming rank {}, not another rank of {}", verdict->rank,
                                 ranks);
  }
  return decoded;
}

}  // namespace crema::mpi::detail
