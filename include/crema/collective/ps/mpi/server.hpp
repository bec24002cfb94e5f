#pragma once

#include <crema/collective/detail/elementwise.hpp>
#include <crema/collective/mpi/detail/abandoned_requests.hpp>
#include <crema/collective/mpi/detail/bounded_waits.hpp>
#include <crema/collective/mpi/detail/mpi_support.hpp>
#include <crema/collective/ps/compression.hpp>
#include <crema/collective/ps/mpi/wire.hpp>
#include <crema/collective/ps/options.hpp>
#include <crema/collective/ps/update_policy.hpp>
#include <crema/core/detail/chrono.hpp>
#include <crema/core/error.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

/// @file
/// The server of an asynchronous parameter server over MPI, in the manner of caffe-parallel: one
/// rank holds the parameters and hands out iterations; the other ranks (`ps_client`, client.hpp)
/// compute a diff for their iteration, send it (compressed, by option), and wait for fresh
/// parameters. The server applies the average of the diffs that arrived when every working client
/// has reported or a wait passes, and every wait is bounded: a silent client is reported late,
/// then lost (its iteration goes to another). Component `crema::mpi`.

namespace crema::mpi {

/// @brief The server of the parameters, on rank `options.server` of a communicator whose other
/// ranks each make a `ps_client<T>` with the same options.
///
/// `serve(iterations)` hands out iterations 0 .. iterations-1 to idle clients, one at a time, with
/// the newest parameters. An update is made when every working client (or one yet to say hello)
/// has sent its diff, or
/// `wait` after the update before, from the diffs that arrived (their average, given to the
/// policy); then each client that reported gets the new parameters and its next iteration. A diff
/// more than τ versions old is redone or dropped (`stale_diff`); a client silent for `lost_after`
/// is lost and its iteration handed out again. When every iteration is applied, dropped or handed
/// again and done, every client gets the final parameters and a shutdown.
///
/// A client that stops in the middle of a message and is lost may wake and send or take the rest:
/// the server keeps what MPI may still write or read of its own until MPI is done with it. The
/// parameters are the caller's: a lost client may get them torn by the updates made meanwhile
/// (its next diff is dropped, as every diff of a lost client), and MPI may still read them for
/// it after the server has gone: keep them until MPI_Finalize.
///
/// Not thread-safe: one thread calls `serve`, and `stats` from it (or from `on_update`). Making a
/// server or a client sets SIGPIPE to be ignored if it still has its default action (a handler of
/// the program's own is kept): otherwise a client killed mid-message ends the server from inside
/// MPI's TCP transport.
/// @tparam T      float or double
/// @tparam Policy an `update_policy` for T
template <class T, update_policy<T> Policy = sgd_momentum<T>>
class parameter_server {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "crema: the parameters are of float or double");

 public:
  /// @param comm       the communicator of the server and its clients (duplicated here: every
  ///                   rank makes its server or client at once, as for an MPI collective)
  /// @param parameters the parameters, their initial values; updated in place and sent from
  /// @param policy     the update rule
  /// @param options    the same on every rank
  /// @throws crema::config_error on fewer than 2 ranks, a server rank that is not this one, or
  ///         bad times; crema::mpi_error if MPI is not initialized for threads
  parameter_server(MPI_Comm comm, std::span<T> parameters, Policy policy = {},
                   ps_options options = {})
      : parameters_(parameters),
        policy_(std::move(policy)),
        options_(options),
        comm_(detail::ps_communicator<T>(comm, parameters.size(), options_, name, true)),
        session_(detail::agree_on_session(comm_, options_.server)),
        sum_(parameters.size()) {
    int ranks = 0;
    MPI_Comm_size(comm_, &ranks);
    for (int rank = 0; rank < ranks; ++rank) {
      if (rank == options_.server) continue;
      stats_.clients.push_back({.rank = rank});
      clients_.push_back({.rank = rank});
    }
  }
  parameter_server(const parameter_server&) = delete;
  parameter_server& operator=(const parameter_server&) = delete;
  ~parameter_server() {
    for (auto& send : sends_) abandoned_.keep(send.request, std::move(send.reply));
  }

  /// @brief Serves `iterations` iterations, then shuts every client down (they get the final
  /// parameters). Blocks; allocates as messages grow.
  /// @param on_update called after each update with its version (1 for the first) and the
  ///                  parameters
  /// @return what happened (also `stats()`)
  /// @throws crema::mpi_error if every client is lost with work left, or a client's parameters
  ///         differ in size (every client is told and raises it too)
  template <class OnUpdate = void (*)(std::uint64_t, std::span<const T>)>
  const ps_server_stats& serve(
      std::uint64_t iterations, OnUpdate on_update = [](std::uint64_t, std::span<const T>) {});

  /// @return what the server saw so far
  [[nodiscard]] const ps_server_stats& stats() const noexcept { return stats_; }
  /// @return the number of updates made
  [[nodiscard]] std::uint64_t version() const noexcept { return stats_.version; }

 private:
  static constexpr const char* name = "parameter_server";
  using clock = std::chrono::steady_clock;

  enum class phase { greeting, working, reported, idle, lost };
  struct client {
    int rank = 0;
    phase now = phase::greeting;
    std::uint64_t iteration = 0;
    clock::time_point since{};  // when it was given work (or the serve began)
  };
  struct pending_send {
    MPI_Request request = MPI_REQUEST_NULL;
    std::size_t client = 0;
    std::shared_ptr<detail::ps_reply> reply;  // what a reply's send reads; none for parameters
  };

  client& client_of(int rank) {
    return clients_[static_cast<std::size_t>(rank < options_.server ? rank : rank - 1)];
  }
  ps_client_record& record_of(const client& c) {
    return stats_.clients[static_cast<std::size_t>(&c - clients_.data())];
  }

  std::optional<std::uint64_t> next_iteration() {
    if (!again_.empty()) {
      const std::uint64_t iteration = again_.front();
      again_.pop_front();
      return iteration;
    }
    if (next_ < iterations_) {
      ++stats_.iterations_handed_out;
      return next_++;
    }
    return std::nullopt;
  }

  // Sends a reply and, for work and shutdowns of clients that listen, the parameters.
  void send_reply(client& c, detail::ps_reply reply) {
    reply.session = session_;
    const std::size_t index = static_cast<std::size_t>(&c - clients_.data());
    auto& record = record_of(c);
    std::shared_ptr<detail::ps_reply> buffer;
    if (spare_replies_.empty()) {
      buffer = std::make_shared<detail::ps_reply>(reply);
    } else {
      buffer = std::move(spare_replies_.back());
      spare_replies_.pop_back();
      *buffer = reply;
    }
    sends_.push_back({MPI_REQUEST_NULL, index, std::move(buffer)});
    detail::check(MPI_Isend(sends_.back().reply.get(), sizeof reply, MPI_BYTE, c.rank,
                            detail::reply_tag, comm_, &sends_.back().request),
                  "MPI_Isend");
    record.bytes_sent += sizeof reply;
    stats_.bytes_sent += sizeof reply;
    if (!reply.with_parameters) return;
    sends_.push_back({MPI_REQUEST_NULL, index, nullptr});
    detail::check(
        MPI_Isend(parameters_.data(), static_cast<int>(parameters_.size_bytes()), MPI_BYTE, c.rank,
                  detail::parameters_tag, comm_, &sends_.back().request),
        "MPI_Isend");
    record.bytes_sent += parameters_.size_bytes();
    stats_.bytes_sent += parameters_.size_bytes();
  }

  // Gives `c` work (with the newest parameters), or makes it idle where none is left.
  void hand_out(client& c, bool refresh = false) {
    const auto iteration = refresh ? std::optional(c.iteration) : next_iteration();
    if (!iteration) {
      c.now = phase::idle;
      return;
    }
    c.now = phase::working;
    c.iteration = *iteration;
    c.since = clock::now();
    send_reply(c, {.kind = detail::ps_reply_kind::work,
                   .version = stats_.version,
                   .iteration = *iteration,
                   .refreshed = refresh ? 1u : 0u,
                   .with_parameters = 1});
  }

  // Sends still reading the parameters must end before they change: what is still on its way to
  // a lost client is given up on without a wait, and the others are waited for together, up to
  // `lost_after` (and the timeout): a client that does not take its parameters by then is lost.
  // (Waited for one by one, a dead client's send would hold up every other client's for as long,
  // and make them give up on the server.) A reply given up on is kept until MPI is done with it;
  // the others' are used again.
  void finish_sends() {
    std::vector<MPI_Request> waiting;
    std::vector<std::size_t> of;
    for (std::size_t i = 0; i < sends_.size(); ++i) {
      pending_send& send = sends_[i];
      if (clients_[send.client].now == phase::lost) {
        abandoned_.keep(send.request, std::move(send.reply));
      } else {
        waiting.push_back(send.request);
        of.push_back(i);
      }
    }
    std::vector<detail::completion> ends(waiting.size());
    detail::wait_each(
        waiting, ends, std::min(options_.lost_after, options_.timeout), [] { return false; },
        /*cancellable=*/false);
    for (std::size_t i = 0; i < ends.size(); ++i) {
      pending_send& send = sends_[of[i]];
      if (ends[i].done) {
        if (send.reply) spare_replies_.push_back(std::move(send.reply));
        continue;
      }
      lose(clients_[send.client]);
      abandoned_.keep(waiting[i], std::move(send.reply));
    }
    sends_.clear();
  }

  void lose(client& c) {
    if (c.now == phase::lost) return;
    if (c.now == phase::working) {
      again_.push_back(c.iteration);
      ++stats_.iterations_handed_again;
    }
    c.now = phase::lost;
    auto& record = record_of(c);
    record.lost = true;
    ++record.times_lost;
  }

  // Receives one message if one is there; returns whether one was.
  bool receive_one() {
    int found = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status{};
    detail::check(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, comm_, &found, &message, &status),
                  "MPI_Improbe");
    if (!found) return false;
    client& c = client_of(status.MPI_SOURCE);
    if (!detail::receive_matched(message, status, incoming_, options_.timeout, abandoned_)) {
      lose(c);  // it stopped in the middle of its message (whose buffer is kept for its rest)
      return true;
    }
    const auto bytes = static_cast<std::uint64_t>(incoming_.size());
    std::uint64_t session = 0;
    if (incoming_.size() >= sizeof session) std::memcpy(&session, incoming_.data(), sizeof session);
    if (session != session_) {
      ++stats_.foreign_messages;
      return true;
    }
    auto& record = record_of(c);
    record.bytes_received += bytes;
    stats_.bytes_received += bytes;
    if (status.MPI_TAG == detail::hello_tag) {
      greet(c);
    } else if (status.MPI_TAG == detail::diff_tag) {
      take_diff(c);
    }
    return true;
  }

  void greet(client& c) {
    detail::ps_hello hello;
    if (incoming_.size() == sizeof hello) std::memcpy(&hello, incoming_.data(), sizeof hello);
    if (hello.magic != detail::ps_magic || hello.count != parameters_.size() ||
        hello.value_bytes != sizeof(T)) {
      refuse_all(crema::detail::format(
          "parameter_server: rank {} has {} parameters of {} bytes; the server on rank {} has {} "
          "of {} bytes",
          c.rank, hello.count, hello.value_bytes, options_.server, parameters_.size(), sizeof(T)));
    }
    if (c.now == phase::greeting || c.now == phase::lost) {
      record_of(c).lost = false;
      hand_out(c);
    }
  }

  [[noreturn]] void refuse_all(const std::string& reason) {
    detail::ps_reply refusal{.kind = detail::ps_reply_kind::refused};
    std::memcpy(refusal.reason, reason.data(), std::min(reason.size(), sizeof refusal.reason - 1));
    for (auto& c : clients_) send_reply(c, refusal);
    finish_sends();
    crema::detail::fail_with_code<mpi_error>(0, "{}", reason);
  }

  void take_diff(client& c) {
    detail::ps_push push;
    auto& record = record_of(c);
    ++record.diffs;
    if (incoming_.size() < sizeof push) {
      ++record.dropped;
      return;
    }
    std::memcpy(&push, incoming_.data(), sizeof push);
    if (c.now != phase::working || push.iteration != c.iteration) {
      // Sent before it was lost, or a diff it owed before: its iteration went to another.
      ++record.dropped;
      if (c.now == phase::lost) {
        record.lost = false;
        hand_out(c);
      }
      return;
    }
    if (push.base_version > stats_.version) {
      refuse_all(crema::detail::format(
          "parameter_server: rank {} sent a diff computed on version {}; the server is at {}",
          c.rank, push.base_version, stats_.version));
    }
    const std::span<const std::byte> encoded =
        std::span<const std::byte>(incoming_).subspan(sizeof push);
    try {
      const std::size_t bytes = encoded_diff_bytes<T>(encoded, sum_.size());
      if (bytes != encoded.size()) {
        refuse_all(crema::detail::format(
            "parameter_server: rank {} sent a diff of {} bytes with {} more bytes after it", c.rank,
            bytes, encoded.size() - bytes));
      }
    } catch (const format_error& e) {
      refuse_all(crema::detail::format(
          "parameter_server: rank {} sent a diff crema cannot read: {}", c.rank, e.what()));
    }
    const std::uint64_t staleness = stats_.version - push.base_version;
    record.max_staleness = std::max(record.max_staleness, staleness);
    record.staleness_sum += staleness;
    if (staleness > options_.max_staleness) {
      if (options_.on_stale == stale_diff::refresh) {
        ++record.refreshed;
        hand_out(c, true);
      } else {
        ++record.dropped;
        hand_out(c);
      }
      return;
    }
    try {
      add_encoded_diff<T>(encoded, std::span<T>(sum_));  // all or nothing
    } catch (const format_error& e) {
      refuse_all(crema::detail::format(
          "parameter_server: rank {} sent a diff crema cannot read: {}", c.rank, e.what()));
    }
    ++record.applied;
    record.max_applied_staleness = std::max(record.max_applied_staleness, staleness);
    const auto arrival = clock::now() - round_began_;
    record.last_arrival = arrival;
    record.max_arrival = std::max(record.max_arrival, record.last_arrival);
    record.arrival_sum += arrival;
    c.now = phase::reported;
    ++contributors_;
  }

  template <class OnUpdate>
  void update(bool timed_out, OnUpdate& on_update) {
    if (contributors_ > 1) {
      crema::detail::scale_into(sum_.data(), sum_.data(), sum_.size(), T(1) / T(contributors_));
    }
    finish_sends();
    policy_(parameters_, std::span<const T>(sum_), stats_.version);
    ++stats_.version;
    if (timed_out) ++stats_.timed_out_updates;
    std::fill(sum_.begin(), sum_.end(), T(0));
    contributors_ = 0;
    round_began_ = clock::now();
    for (auto& c : clients_) {
      if (c.now == phase::working && timed_out) ++record_of(c).late;
    }
    on_update(stats_.version, std::span<const T>(parameters_));
    for (auto& c : clients_) {
      if (c.now == phase::reported) hand_out(c);
    }
  }

  [[nodiscard]] bool any(phase p) const {
    return std::any_of(clients_.begin(), clients_.end(),
                       [&](const client& c) { return c.now == p; });
  }

  void shut_down() {
    for (auto& c : clients_) {
      send_reply(c, {.kind = detail::ps_reply_kind::done,
                     .version = stats_.version,
                     .with_parameters = c.now == phase::lost ? 0u : 1u});
    }
    // A lost client may never take its shutdown: only the others' sends are waited for, and the
    // replies not taken are kept until MPI is done with them.
    for (auto& send : sends_) {
      if (clients_[send.client].now != phase::lost &&
          detail::wait_for(send.request, options_.timeout)) {
        continue;
      }
      lose(clients_[send.client]);
      abandoned_.keep(send.request, std::move(send.reply));
    }
    sends_.clear();
  }

  std::span<T> parameters_;
  Policy policy_;
  ps_options options_;
  detail::owned_comm comm_;
  std::uint64_t session_ = 0;
  std::vector<T> sum_;  // of the diffs of this update
  std::size_t contributors_ = 0;
  std::vector<client> clients_;
  std::deque<std::uint64_t> again_;  // iterations of lost clients
  std::uint64_t next_ = 0;
  std::uint64_t iterations_ = 0;
  clock::time_point round_began_{};
  bool served_ = false;
  std::vector<std::byte> incoming_;
  std::vector<pending_send> sends_;
  std::vector<std::shared_ptr<detail::ps_reply>> spare_replies_;  // replies sent, for reuse
  detail::abandoned_requests abandoned_;  // sends to lost clients, receives they left half-way
  ps_server_stats stats_;
};

// --- definitions -------------------------------------------------------------------------------

template <class T, update_policy<T> Policy>
template <class OnUpdate>
const ps_server_stats& parameter_server<T, Policy>::serve(std::uint64_t iterations,
                                                          OnUpdate on_update) {
  if (served_) {
    crema::detail::fail<state_error>("parameter_server: serves once; its clients are shut down");
  }
  served_ = true;
  iterations_ = iterations;
  round_began_ = clock::now();
  for (auto& c : clients_) c.since = round_began_;
  for (;;) {
    abandoned_.sweep();
    const bool heard = receive_one();
    const auto now = clock::now();
    if (contributors_ > 0) {
      // Everyone: no client is working or yet to say hello (the first update waits for all).
      const bool everyone = !any(phase::working) && !any(phase::greeting);
      if (everyone || now - round_began_ >= options_.wait) update(!everyone, on_update);
    }
    for (auto& c : clients_) {
      if ((c.now == phase::working || c.now == phase::greeting) &&
          now - c.since >= options_.lost_after) {
        lose(c);
      }
    }
    for (auto& c : clients_) {  // an iteration handed back finds an idle client
      if (!again_.empty() && c.now == phase::idle) hand_out(c);
    }
    const bool work_left = !again_.empty() || next_ < iterations_;
    if (!work_left && contributors_ == 0 && !any(phase::working)) break;
    if (std::all_of(clients_.begin(), clients_.end(),
                    [](const client& c) { return c.now == phase::lost; })) {
      shut_down();
      crema::detail::fail_with_code<mpi_error>(
          0, "parameter_server: every client is lost, with {} iterations not done",
          again_.size() + (iterations_ - next_));
    }
    if (!heard) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  shut_down();
  return stats_;
}

}  // namespace crema::mpi
