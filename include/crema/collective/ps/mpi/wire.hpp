#pragma once

#include <crema/collective/mpi/detail/mpi_support.hpp>
#include <crema/collective/ps/compression.hpp>
#include <crema/collective/ps/options.hpp>
#include <crema/core/detail/chrono.hpp>
#include <crema/core/error.hpp>

#include <mpi.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>

/// @file
/// The parameter server's wire format: the messages a server and its clients exchange (tags,
/// hello, push, reply), the session every message carries, and the communicator they share.
/// Component `crema::mpi`.

namespace crema::mpi {

namespace detail {

inline constexpr int hello_tag = 11;
inline constexpr int diff_tag = 12;
inline constexpr int reply_tag = 13;
inline constexpr int parameters_tag = 14;

inline constexpr std::uint64_t ps_magic = 0x6372656d612d7073;  // "crema-ps"

// Every message opens with its session: a number the server draws and every rank learns at
// construction. MPI reuses a freed communicator's context for the next one, and a message of an
// earlier server or client still on its way over TCP can arrive in the next session's: such a
// message is told by its session and dropped, never read as this session's.
struct ps_hello {
  std::uint64_t session = 0;
  std::uint64_t magic = ps_magic;
  std::uint64_t count = 0;
  std::uint64_t value_bytes = 0;
};

struct ps_push {
  std::uint64_t session = 0;
  std::uint64_t base_version = 0;
  std::uint64_t iteration = 0;
};

enum class ps_reply_kind : std::uint64_t { work = 1, done, refused };

struct ps_reply {
  std::uint64_t session = 0;
  ps_reply_kind kind = ps_reply_kind::work;
  std::uint64_t version = 0;
  std::uint64_t iteration = 0;
  std::uint64_t refreshed = 0;        // the same iteration again, on newer parameters
  std::uint64_t with_parameters = 0;  // a parameters message follows
  char reason[240] = {};              // why, for `refused`
};

// The server draws the session; every rank of the new communicator learns it (collective).
inline std::uint64_t agree_on_session(MPI_Comm comm, int server) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  std::uint64_t session = 0;
  if (rank == server) {
    std::random_device entropy;
    session = (std::uint64_t{entropy()} << 32) ^ entropy() ^ 1u;  // never 0
  }
  check(MPI_Bcast(&session, 1, MPI_UINT64_T, server, comm), "MPI_Bcast");
  return session;
}

// Duplicates `comm` (collective) and checks the job's shape and the server's rank.
template <class T>
owned_comm ps_communicator(MPI_Comm comm, std::size_t count, const ps_options& options,
                           const char* component, bool server) {
  require_thread_level(component);
  survive_dead_peers();
  diff_encoder<T>::validate(count, options.diffs);
  if (count > static_cast<std::size_t>(INT_MAX) / sizeof(T)) {
    crema::detail::fail<config_error>(
        "{}: {} parameters of {} bytes are past the {} bytes one MPI message can carry", component,
        count, sizeof(T), INT_MAX);
  }
  if (options.wait <= std::chrono::milliseconds::zero() ||
      options.lost_after <= std::chrono::milliseconds::zero() || options.timeout <= options.wait) {
    crema::detail::fail<config_error>(
        "{}: wait ({} ms) and lost_after ({} ms) must be positive and timeout ({} ms) longer than "
        "wait",
        component, options.wait.count(), options.lost_after.count(), options.timeout.count());
  }
  owned_comm own(comm);
  int rank = 0;
  int ranks = 1;
  MPI_Comm_rank(own, &rank);
  MPI_Comm_size(own, &ranks);
  std::string problem;
  if (ranks < 2) {
    problem = crema::detail::format(
        "{}: needs a server and at least one client; the communicator has {} rank", component,
        ranks);
  } else if (options.server < 0 || options.server >= ranks) {
    problem = crema::detail::format("{}: server rank {} is not in a communicator of {} ranks",
                                    component, options.server, ranks);
  } else if (server != (rank == options.server)) {
    problem = crema::detail::format("{}: made on rank {} while the server is rank {}", component,
                                    rank, options.server);
  }
  if (!problem.empty()) crema::detail::fail<config_error>("{}", problem);
  return own;
}

}  // namespace detail

}  // namespace crema::mpi
