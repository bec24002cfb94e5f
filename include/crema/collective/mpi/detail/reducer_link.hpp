#pragma once

#include <crema/collective/mpi/detail/bounded_waits.hpp>
#include <crema/collective/mpi/detail/failure_board.hpp>
#include <crema/collective/mpi/detail/mpi_support.hpp>
#include <crema/collective/mpi/detail/reducer_wire.hpp>
#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/library_inline.hpp>

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <variant>

namespace crema::mpi::detail {

/// @brief What an `mpi_reducer` holds the same on every rank: the ranks compare it before every
/// operation.
struct reducer_shape {
  std::uint64_t elements = 0;            ///< in each local buffer
  std::uint64_t local_participants = 0;  ///< on each rank
  std::uint64_t element_bytes = 0;       ///< sizeof the element type
};

/// @brief An `mpi_reducer`'s link to the other ranks: its own communicator (a duplicate of the
/// user's), the agreement that precedes every operation, and the bounded waits that name the rank
/// at fault when one disagrees, goes silent or sends what the protocol does not allow.
///
/// Everything here is the same for every element type, so it is compiled once, in the crema::mpi
/// library (unless CREMA_HEADER_ONLY); the reducer keeps the reduction itself. Once a wait fails
/// the link is *spent*: every later `agree` raises at once, and the error of the failure names
/// the rank at fault (found by asking along the ranks' waits, or told by another rank that gave
/// up on it first). Not thread-safe: the reducer calls it under its lock.
class reducer_link {
 public:
  /// The peer of a wait in a collective, where any rank may hold it up.
  static constexpr int anyone = waits_for_anyone;

  /// @param comm    the user's communicator (duplicated here, errors returned rather than fatal)
  /// @param timeout how long one wait lasts before the link gives up on the rank it waits for
  /// @throws crema::mpi_error if MPI is not initialized with MPI_THREAD_SERIALIZED or more
  /// @throws crema::config_error if the timeout is not positive
  CREMA_LIBRARY_INLINE reducer_link(MPI_Comm comm, std::chrono::milliseconds timeout);
  reducer_link(const reducer_link&) = delete;
  reducer_link& operator=(const reducer_link&) = delete;

  /// @return the communicator the reducer sends its data on
  [[nodiscard]] MPI_Comm comm() const noexcept { return comm_; }
  /// @return this rank, on the link's communicator
  [[nodiscard]] std::size_t rank() const noexcept { return rank_; }
  /// @return the number of ranks
  [[nodiscard]] std::size_t ranks() const noexcept { return ranks_; }

  /// @brief All ranks agree on the next operation, or every one of them raises `mpi_error` naming
  /// the rank whose view differs (and both views), the one that went silent or the one that sent
  /// something other than a view; no data has moved by then.
  /// @throws crema::mpi_error as said, or at once if the link is spent
  CREMA_LIBRARY_INLINE void agree(reducer_operation op, std::size_t begin, std::size_t end,
                                  std::size_t root, const reducer_shape& shape);

  /// @brief Waits for every request (sends, a broadcast) until the timeout; a peer whose request
  /// did not end in time, or failed, spends the link, named (or the rank it waits for, if that is
  /// the one that stopped answering). `what` names the exchange in the error. With `cancellable`
  /// false (a non-blocking collective's requests), requests left are not cancelled.
  CREMA_LIBRARY_INLINE void wait(std::span<MPI_Request> requests, std::span<const int> peers,
                                 const char* what, bool cancellable = true);

  /// @brief Waits for one receive of `bytes` bytes from `peer`, as `wait`; a message of any other
  /// size is never used: it spends the link, naming the peer.
  CREMA_LIBRARY_INLINE void receive(MPI_Request& request, int peer, std::size_t bytes,
                                    const char* what);

  /// @brief Where the link is spent with peers that may still send to it: keeps its
  /// communicator until the program exits (freed, its id would take a waking peer's messages to
  /// a later reducer's), and says that the reducer must keep the buffers MPI may still write.
  [[nodiscard]] CREMA_LIBRARY_INLINE bool keep_what_peers_may_reach();

 private:
  using view = reducer_view;

  [[nodiscard]] static CREMA_LIBRARY_INLINE std::string describe(const view& v);
  CREMA_LIBRARY_INLINE reducer_verdict hear_views(const view& mine);
  CREMA_LIBRARY_INLINE reducer_verdict hear_verdict(const view& mine);
  [[noreturn]] CREMA_LIBRARY_INLINE void spend(std::string reason, bool quiet = false);
  CREMA_LIBRARY_INLINE std::optional<std::size_t> wait_each(std::span<MPI_Request> requests,
                                                            std::span<completion> ends,
                                                            std::span<const int> peers,
                                                            std::chrono::milliseconds timeout,
                                                            bool cancellable = true);
  CREMA_LIBRARY_INLINE void wait_on(std::optional<int> peer) noexcept;
  CREMA_LIBRARY_INLINE bool between_polls();
  [[noreturn]] CREMA_LIBRARY_INLINE void give_up_on_silent(int peer, const char* what);
  [[noreturn]] CREMA_LIBRARY_INLINE void give_up_on_silent(int peer, const std::string& waited);
  CREMA_LIBRARY_INLINE std::optional<int> culprit_behind(int peer);
  CREMA_LIBRARY_INLINE std::optional<waiting_reply> ask(int rank,
                                                        std::chrono::milliseconds patience);
  [[noreturn]] CREMA_LIBRARY_INLINE void name_what_was_heard();
  [[noreturn]] CREMA_LIBRARY_INLINE void give_up_on(int culprit, std::string reason);

  std::chrono::milliseconds timeout_;
  owned_comm comm_;
  board_seat seat_;  // after comm_: off the board before it is freed
  std::size_t rank_ = 0;
  std::size_t ranks_ = 1;
  std::uint64_t step_ = 0;          // operations agreed, the same count on every rank that agrees
  std::optional<int> waiting_for_;  // the rank a wait is held up by now, as told to the board
  // The failure another rank told this one of: its sender and the notice, or what was wrong
  // with it.
  std::optional<std::pair<std::size_t, std::variant<failure_notice, std::string>>> heard_;
  bool spent_ = false;
  bool peers_quiet_ = false;  // spent, with nothing of a peer's on its way (see `spend`)
  std::string spent_reason_;
};

}  // namespace crema::mpi::detail

#if defined(CREMA_HEADER_ONLY)
#include <crema/collective/mpi/detail/reducer_link_impl.hpp>
#endif
