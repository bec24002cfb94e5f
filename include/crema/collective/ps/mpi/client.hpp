#pragma once

#include <crema/collective/mpi/detail/abandoned_requests.hpp>
#include <crema/collective/mpi/detail/bounded_waits.hpp>
#include <crema/collective/mpi/detail/mpi_support.hpp>
#include <crema/collective/ps/compression.hpp>
#include <crema/collective/ps/mpi/wire.hpp>
#include <crema/collective/ps/options.hpp>
#include <crema/core/detail/chrono.hpp>
#include <crema/core/detail/fmt.hpp>
#include <crema/core/error.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

/// @file
/// A client of the parameter server (server.hpp): pulls parameters and an iteration, pushes the
/// diff it computed, compressed by option with error feedback; a silent server makes it raise
/// `crema::mpi_error`. Component `crema::mpi`.

namespace crema::mpi {

/// @brief A client of a `parameter_server`: every rank but the server's makes one, with the
/// same options.
///
/// `pull()` waits for parameters (written into the span) and an iteration to compute; `push(diff)`
/// sends the diff of that iteration (compressed by `options.diffs`, with error feedback) without
/// waiting; `exchange(diff)` does both. `pull()` returns no iteration once the server shut down,
/// the final parameters in place. A server silent for `timeout` makes `pull` raise
/// `crema::mpi_error` naming it. A server that stopped in the middle of a message may wake and
/// send or take the rest: the client keeps what MPI may still use of its own until MPI is done
/// with it, but the parameters are the caller's, and MPI may still write them then, until
/// MPI_Finalize. Once it raised `mpi_error` (a silent server, a refusal, a reply it cannot
/// read), the client is spent: its session's messages may be half-way or lost, so every later
/// `pull` or `push` raises `mpi_error` at once, naming that failure, rather than wait for a reply
/// that may never come or take another exchange's.
///
/// Not thread-safe: one thread calls it. `push` allocates only while its message grows.
/// @tparam T float or double
template <class T>
class ps_client {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "crema: the parameters are of float or double");

 public:
  /// @param comm       the communicator of the server and its clients (duplicated here)
  /// @param parameters where the server's parameters are written, as many as the server's
  /// @param options    the same on every rank
  /// @throws crema::config_error as `parameter_server`'s, or a bad compression
  ps_client(MPI_Comm comm, std::span<T> parameters, ps_options options = {})
      : parameters_(parameters),
        options_(options),
        encoder_(parameters.size(), options.diffs),
        comm_(detail::ps_communicator<T>(comm, parameters.size(), options_, name, false)),
        session_(detail::agree_on_session(comm_, options_.server)) {
    MPI_Comm_rank(comm_, &rank_);
    crema::detail::append_bytes(
        message_, detail::ps_hello{
                      .session = session_, .count = parameters_.size(), .value_bytes = sizeof(T)});
    detail::check(MPI_Isend(message_.data(), static_cast<int>(message_.size()), MPI_BYTE,
                            options_.server, detail::hello_tag, comm_, &send_),
                  "MPI_Isend");
    stats_.bytes_sent += message_.size();
  }
  ps_client(const ps_client&) = delete;
  ps_client& operator=(const ps_client&) = delete;
  ~ps_client() { give_up_sending(); }

  /// @brief Waits for the server's parameters and this client's next iteration.
  /// @return the iteration to compute, or nothing once the server shut down (the final
  ///         parameters in place)
  /// @throws crema::mpi_error if the server is silent for `timeout`, or refused this job, or
  ///         the client is spent by such a failure before; crema::state_error if the iteration
  ///         it gave before was not pushed
  std::optional<std::uint64_t> pull();

  /// @brief Sends the diff of the iteration `pull` gave, compressed; returns once the message is
  /// on its way (waiting only for the previous one to have left).
  /// @throws crema::state_error without an iteration to answer; crema::length_error on a diff of
  ///         another size; crema::mpi_error if the previous message did not leave in `timeout`,
  ///         or the client is spent
  void push(std::span<const T> diff);

  /// @brief `push(diff)`, then `pull()`.
  std::optional<std::uint64_t> exchange(std::span<const T> diff) {
    push(diff);
    return pull();
  }

  /// @return the version of the parameters in place (the server's updates before them)
  [[nodiscard]] std::uint64_t version() const noexcept { return version_; }
  /// @return this client's rank
  [[nodiscard]] int rank() const noexcept { return rank_; }
  /// @return what this client sent and received
  [[nodiscard]] const ps_client_stats& stats() const noexcept { return stats_; }
  /// @return what is owed to the server: the part of past diffs not sent yet
  [[nodiscard]] std::span<const T> owed() const noexcept { return encoder_.owed(); }

 private:
  static constexpr const char* name = "ps_client";

  // The parameters that follow a foreign reply (of whatever size) are received and dropped: they
  // come before this session's, from the same rank.
  void drop_foreign_parameters() {
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status{};
    const bool found = detail::poll_until(
        [&] {
          int there = 0;
          detail::check(MPI_Improbe(options_.server, detail::parameters_tag, comm_, &there,
                                    &message, &status),
                        "MPI_Improbe");
          return there != 0;
        },
        options_.timeout);
    if (found &&
        !detail::receive_matched(message, status, foreign_, options_.timeout, abandoned_)) {
      server_silent("dropping an earlier session's parameters");
    }
  }

  // Waits for the message on its way to the server to have left.
  void await_send(const char* what) {
    if (detail::wait_for(send_, options_.timeout)) return;
    give_up_sending();
    server_silent(what);
  }
  // Leaves the message on its way to the server to MPI, with its bytes: the server may take the
  // rest if it wakes.
  void give_up_sending() { abandoned_.keep(send_, std::move(message_)); }

  // Waits for a receive of `expected` bytes from the server into `buffer` (kept for MPI if the
  // receive is given up on; none for the caller's parameters); a message of another size (a
  // shorter one would leave old bytes in place) is an error naming the server.
  void await_exactly(MPI_Request& request, std::size_t expected,
                     const std::shared_ptr<const void>& buffer, const char* what) {
    MPI_Status status{};
    const bool done = detail::poll_until(
        [&] {
          int complete = 0;
          detail::check(MPI_Test(&request, &complete, &status), "MPI_Test");
          return complete != 0;
        },
        options_.timeout);
    if (!done) {
      abandoned_.keep(request, buffer);
      server_silent(what);
    }
    int count = 0;
    MPI_Get_count(&status, MPI_BYTE, &count);
    if (static_cast<std::size_t>(count) != expected) {
      spend(crema::detail::format(
          "ps_client: rank {} got {} bytes from the server, rank {}, {}; {} expected", rank_, count,
          options_.server, what, expected));
    }
  }

  [[noreturn]] void server_silent(const char* what) {
    spend(crema::detail::format(
        "ps_client: rank {} heard nothing from the server, rank {}, within {} ms ({})", rank_,
        options_.server, options_.timeout.count(), what));
  }

  // Raises `message` as an mpi_error, and every later call with it.
  [[noreturn]] void spend(std::string message) {
    spent_ = std::move(message);
    crema::detail::fail_with_code<mpi_error>(0, "{}", *spent_);
  }
  void check_not_spent(const char* call) const {
    if (!spent_) return;
    std::string_view failure = *spent_;
    if (failure.starts_with(own_prefix)) failure.remove_prefix(own_prefix.size());
    crema::detail::fail_with_code<mpi_error>(
        0, "ps_client: rank {} cannot {} after its session failed: {}", rank_, call, failure);
  }
  static constexpr std::string_view own_prefix = "ps_client: ";

  std::span<T> parameters_;
  ps_options options_;
  diff_encoder<T> encoder_;
  detail::owned_comm comm_;
  std::uint64_t session_ = 0;
  std::vector<std::byte> foreign_;  // where a foreign message's parameters are dropped
  int rank_ = 0;
  std::shared_ptr<detail::ps_reply> reply_ = std::make_shared<detail::ps_reply>();
  std::vector<std::byte> message_;  // the hello, then each diff
  MPI_Request send_ = MPI_REQUEST_NULL;
  detail::abandoned_requests abandoned_;    // what a silent server left half-way
  std::optional<std::uint64_t> iteration_;  // the work to answer
  std::uint64_t version_ = 0;
  bool done_ = false;
  std::optional<std::string> spent_;  // the failure that ended its session
  ps_client_stats stats_;
};

// --- definitions -------------------------------------------------------------------------------

template <class T>
std::optional<std::uint64_t> ps_client<T>::pull() {
  check_not_spent("pull");
  if (done_) return std::nullopt;
  abandoned_.sweep();
  if (iteration_) {  // the server waits for this diff before it sends anything more
    crema::detail::fail<state_error>(
        "ps_client: rank {} pulls again before it pushed the diff of iteration {}", rank_,
        *iteration_);
  }
  // A reply buffer that a receive given up on left to MPI is not used again.
  if (reply_.use_count() > 1) reply_ = std::make_shared<detail::ps_reply>();
  detail::ps_reply& reply = *reply_;
  MPI_Request request = MPI_REQUEST_NULL;
  for (;;) {
    detail::check(MPI_Irecv(&reply, sizeof reply, MPI_BYTE, options_.server, detail::reply_tag,
                            comm_, &request),
                  "MPI_Irecv");
    await_exactly(request, sizeof reply, reply_, "waiting for parameters");
    stats_.bytes_received += sizeof reply;
    if (reply.session == session_) break;
    ++stats_.foreign_messages;
    if (reply.with_parameters) drop_foreign_parameters();
  }
  if (reply.kind != detail::ps_reply_kind::work && reply.kind != detail::ps_reply_kind::done &&
      reply.kind != detail::ps_reply_kind::refused) {
    spend(crema::detail::format(
        "ps_client: rank {} got a reply of unknown kind {} from the server, rank {}", rank_,
        static_cast<std::uint64_t>(reply.kind), options_.server));
  }
  if (reply.kind == detail::ps_reply_kind::refused) {
    reply.reason[sizeof reply.reason - 1] = '\0';
    spend(reply.reason);
  }
  if (reply.with_parameters) {
    detail::check(MPI_Irecv(parameters_.data(), static_cast<int>(parameters_.size_bytes()),
                            MPI_BYTE, options_.server, detail::parameters_tag, comm_, &request),
                  "MPI_Irecv");
    await_exactly(request, parameters_.size_bytes(), nullptr, "receiving parameters");
    stats_.bytes_received += parameters_.size_bytes();
    version_ = reply.version;
  }
  if (reply.kind == detail::ps_reply_kind::done) {
    done_ = true;
    iteration_.reset();
    return std::nullopt;
  }
  if (reply.refreshed) ++stats_.refreshed;
  iteration_ = reply.iteration;
  return iteration_;
}

template <class T>
void ps_client<T>::push(std::span<const T> diff) {
  check_not_spent("push");
  if (!iteration_) {
    crema::detail::fail<state_error>(
        "ps_client: rank {} pushes a diff with no iteration to answer: pull() first", rank_);
  }
  if (diff.size() != parameters_.size()) {
    crema::detail::fail<length_error>(
        "ps_client: rank {} pushes a diff of {} elements, expected {}", rank_, diff.size(),
        parameters_.size());
  }
  await_send("sending its previous message");
  message_.clear();
  crema::detail::append_bytes(message_, detail::ps_push{session_, version_, *iteration_});
  stats_.coordinates_sent += encoder_.encode(diff, message_);
  if (message_.size() > static_cast<std::size_t>(INT_MAX)) {
    crema::detail::fail<length_error>("ps_client: a message of {} bytes is past MPI's int count",
                                      message_.size());
  }
  detail::check(MPI_Isend(message_.data(), static_cast<int>(message_.size()), MPI_BYTE,
                          options_.server, detail::diff_tag, comm_, &send_),
                "MPI_Isend");
  ++stats_.pushes;
  stats_.bytes_sent += message_.size();
  stats_.bytes_dense += sizeof(detail::ps_push) + dense_diff_bytes<T>(parameters_.size());
  iteration_.reset();
}

}  // namespace crema::mpi
