#pragma once

#include <crema/collective/ps/compression.hpp>
#include <crema/core/detail/chrono.hpp>

#include <cstdint>
#include <limits>
#include <vector>

/// @file
/// What a parameter server and its clients are told (`ps_options`) and what they report
/// (`ps_server_stats`, `ps_client_stats`). Needs no MPI.

namespace crema::mpi {

/// @brief What the server does with a diff computed on parameters more than `max_staleness`
/// versions old.
enum class stale_diff {
  refresh,  ///< not applied: the client gets the newest parameters and the same iteration again
  drop,     ///< not applied and counted: the client gets the newest parameters and new work
};

/// @brief How a parameter server and its clients work; every rank of a job passes the same.
struct ps_options {
  /// The rank of the server in the communicator; every other rank is a client.
  int server = 0;
  /// Server: how long an update waits for working clients after the one before it (caffe-parallel
  /// waited 3 s); then it applies the diffs that arrived, and the clients that did not report are
  /// late.
  std::chrono::milliseconds wait{std::chrono::seconds(3)};
  /// Server: a client that has not answered its work for this long is lost; its iteration goes
  /// to another client. A diff from it later is dropped and it gets work again.
  std::chrono::milliseconds lost_after{std::chrono::seconds(30)};
  /// Client: how long it waits for the server before raising `crema::mpi_error`; both: how long
  /// one message may take. Longer than `wait`.
  std::chrono::milliseconds timeout{std::chrono::seconds(60)};
  /// τ: the most versions a diff's parameters may be behind the server's and still be applied.
  std::uint64_t max_staleness = std::numeric_limits<std::uint64_t>::max();
  stale_diff on_stale = stale_diff::refresh;
  /// Client: how diffs travel (the server reads whatever a client sends).
  compression diffs{};
};

/// @brief What the server saw of one client.
struct ps_client_record {
  int rank = 0;
  std::uint64_t diffs = 0;      ///< diffs received
  std::uint64_t applied = 0;    ///< of them, in an update
  std::uint64_t dropped = 0;    ///< of them, too stale (`stale_diff::drop`) or sent while lost
  std::uint64_t refreshed = 0;  ///< of them, too stale and redone (`stale_diff::refresh`)
  std::uint64_t late = 0;       ///< updates made without it while it was working
  std::uint64_t times_lost = 0;
  bool lost = false;                        ///< lost now
  std::uint64_t max_staleness = 0;          ///< of the diffs received
  std::uint64_t max_applied_staleness = 0;  ///< of the diffs applied (at most τ)
  std::uint64_t staleness_sum = 0;          ///< of the diffs received
  /// When its diffs arrived, from the update before them: a straggler's are late in the wait.
  std::chrono::nanoseconds last_arrival{0};
  std::chrono::nanoseconds max_arrival{0};
  std::chrono::nanoseconds arrival_sum{0};
  std::uint64_t bytes_received = 0;
  std::uint64_t bytes_sent = 0;
};

/// @brief What a parameter server did.
struct ps_server_stats {
  std::uint64_t version = 0;            ///< updates applied
  std::uint64_t timed_out_updates = 0;  ///< of them, made at the wait's end without everyone
  std::uint64_t iterations_handed_out = 0;
  std::uint64_t iterations_handed_again = 0;  ///< of lost clients, given to others
  std::uint64_t bytes_received = 0;
  std::uint64_t bytes_sent = 0;
  /// Messages of an earlier session on a reused communicator, dropped.
  std::uint64_t foreign_messages = 0;
  std::vector<ps_client_record> clients;  ///< by rank, the server's own left out
};

/// @brief What a client did.
struct ps_client_stats {
  std::uint64_t pushes = 0;
  std::uint64_t coordinates_sent = 0;
  std::uint64_t refreshed = 0;    ///< iterations handed back to redo on newer parameters
  std::uint64_t bytes_sent = 0;   ///< its messages, headers included
  std::uint64_t bytes_dense = 0;  ///< what its diffs would have been uncompressed
  std::uint64_t bytes_received = 0;
  /// Messages of an earlier session on a reused communicator, dropped.
  std::uint64_t foreign_messages = 0;
};

}  // namespace crema::mpi
