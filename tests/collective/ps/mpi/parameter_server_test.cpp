// The parameter server across the ranks of one job (run by CTest with 1, 2 and 4 ranks): rank 0
// serves, every other rank is a client. It converges on a convex problem with each compression,
// hands out every iteration once, keeps its staleness bound, outlives a silent client, and a
// silent server makes its clients fail in time.
#include <crema/collective/ps/mpi/parameter_server.hpp>

#include "collective/mpi/mpi_world.hpp"

#include <doctest/doctest.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

using world = crema::test::mpi_world;

// f(w) = 1/2 sum_j h_j (w_j - target_j)^2, its gradient seen through noise that depends on the
// iteration only: any client computing iteration i computes the same gradient.
struct convex_problem {
  std::vector<float> curvature;
  std::vector<float> target;

  explicit convex_problem(std::size_t count) : curvature(count), target(count) {
    std::mt19937 generator(11);
    std::uniform_real_distribution<float> h(0.5f, 1.5f);
    std::uniform_real_distribution<float> t(-2.0f, 2.0f);
    for (std::size_t j = 0; j < count; ++j) {
      curvature[j] = h(generator);
      target[j] = t(generator);
    }
  }
  void gradient(std::uint64_t iteration, std::span<const float> w, std::span<float> out) const {
    std::mt19937 generator(static_cast<std::uint32_t>(1000 + iteration));
    std::normal_distribution<float> noise(0.0f, 0.01f);
    for (std::size_t j = 0; j < w.size(); ++j) {
      out[j] = curvature[j] * (w[j] - target[j]) + noise(generator);
    }
  }
  [[nodiscard]] double distance(std::span<const float> w) const {
    double sum = 0.0;
    for (std::size_t j = 0; j < w.size(); ++j) sum += (w[j] - target[j]) * (w[j] - target[j]);
    return std::sqrt(sum);
  }
};

crema::mpi::ps_options fast_options() {
  crema::mpi::ps_options options;
  options.wait = 500ms;
  options.lost_after = 20s;
  options.timeout = 30s;
  return options;
}

// Every client's iterations, gathered at rank 0.
std::vector<std::uint64_t> gather_iterations(const world& job,
                                             const std::vector<std::uint64_t>& mine) {
  const int count = static_cast<int>(mine.size());
  std::vector<int> counts(static_cast<std::size_t>(job.ranks));
  MPI_Gather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> offsets(counts.size());
  std::exclusive_scan(counts.begin(), counts.end(), offsets.begin(), 0);
  std::vector<std::uint64_t> all(
      (job.rank == 0) ? static_cast<std::size_t>(offsets.back() + counts.back()) : 0);
  MPI_Gatherv(mine.data(), count, MPI_UINT64_T, all.data(), counts.data(), offsets.data(),
              MPI_UINT64_T, 0, MPI_COMM_WORLD);
  return all;
}

// The client's side of a run: computes each iteration's gradient until shutdown, sleeping
// `slow` before answering; returns the iterations it answered.
std::vector<std::uint64_t> run_client(crema::mpi::ps_client<float>& client,
                                      const convex_problem& problem, std::vector<float>& w,
                                      std::chrono::milliseconds slow = 0ms) {
  std::vector<float> gradient(w.size());
  std::vector<std::uint64_t> answered;
  for (auto iteration = client.pull(); iteration; iteration = client.exchange(gradient)) {
    problem.gradient(*iteration, w, gradient);
    if (slow > 0ms) std::this_thread::sleep_for(slow);
    answered.push_back(*iteration);
  }
  return answered;
}

}  // namespace

TEST_SUITE("parameter_server") {
  TEST_CASE("a job of one rank has no client: the server is refused by name") {
    const world job;
    if (job.ranks != 1) return;
    std::vector<float> w(4);
    const crema::test::traced_comm comm;
    CHECK_THROWS_WITH_AS(crema::mpi::parameter_server<float>(comm.get(), w),
                         doctest::Contains("needs a server and at least one client"),
                         crema::config_error);
    CHECK(comm.duplicates() == 1);  // made to ask its size, and freed again
    CHECK(comm.duplicates_freed() == 1);
  }

  TEST_CASE(
      "a server and its clients survive a peer's broken connection: SIGPIPE left at its default "
      "is ignored") {
    const world job;
    if (job.ranks < 2) return;
    const crema::test::sigpipe_restored restore;
    std::signal(SIGPIPE, SIG_DFL);
    std::vector<float> w(8, 0.0f);
    if (job.rank == 0) {
      crema::mpi::parameter_server<float> server(MPI_COMM_WORLD, w, {}, fast_options());
      CHECK((crema::test::sigpipe_action() == SIG_IGN));
      CHECK(server.serve(static_cast<std::uint64_t>(job.ranks)).iterations_handed_out ==
            static_cast<std::uint64_t>(job.ranks));
    } else {
      crema::mpi::ps_client<float> client(MPI_COMM_WORLD, w, fast_options());
      CHECK((crema::test::sigpipe_action() == SIG_IGN));
      const std::vector<float> diff(w.size(), 0.0f);
      for (auto iteration = client.pull(); iteration; iteration = client.exchange(diff)) {
      }
    }
  }

  TEST_CASE("it converges on a convex problem with and without each compression") {
    const world job;
    if (job.ranks < 2) return;
    constexpr std::size_t count = 400;
    constexpr std::uint64_t iterations = 900;
    const convex_problem problem(count);
    const std::vector<crema::compression> compressions{{},
                                                       crema::compression{}.with_fp16(),
                                                       crema::compression::top_k(0.05),
                                                       crema::compression::above(0.01),
                                                       crema::compression::top_k(0.05).with_fp16()};
    for (std::size_t which = 0; which < compressions.size(); ++which) {
      CAPTURE(which);
      auto options = fast_options();
      options.diffs = compressions[which];
      std::vector<float> w(count, 0.0f);
      std::vector<std::uint64_t> answered;
      double distance = 0.0;
      if (job.rank == 0) {
        crema::mpi::parameter_server<float> server(
            MPI_COMM_WORLD, w, crema::mpi::sgd_momentum<float>(0.03f, 0.0f), options);
        const auto& stats = server.serve(iterations);
        distance = problem.distance(w);
        std::uint64_t applied = 0;
        for (const auto& client : stats.clients) {
          applied += client.applied;
          CHECK(client.dropped == 0);
          CHECK(!client.lost);
        }
        CHECK(applied == iterations);  // no bound on staleness: every diff is applied
        CHECK(stats.version >= iterations / static_cast<std::uint64_t>(job.ranks - 1));
        CHECK(distance < 0.01 * problem.distance(std::vector<float>(count, 0.0f)));
      } else {
        crema::mpi::ps_client<float> client(MPI_COMM_WORLD, w, options);
        answered = run_client(client, problem, w);
        CHECK(!client.pull());  // shut down stays shut down
        const auto& stats = client.stats();
        CHECK(stats.pushes == answered.size());
        if (compressions[which].rule == crema::sparsify::top_k) {
          // 5% of the coordinates as (index, value) pairs, a tenth of the dense values; with the
          // headers of 400-element messages, under a sixth of the dense bytes.
          CHECK(stats.bytes_sent < stats.bytes_dense / 6);
        }
        if (compressions[which].rule == crema::sparsify::none && compressions[which].fp16) {
          CHECK(stats.bytes_sent < stats.bytes_dense * 6 / 10);
        }
      }
      // Every iteration was answered exactly once, across the clients.
      auto all = gather_iterations(job, answered);
      if (job.rank == 0) {
        std::sort(all.begin(), all.end());
        std::vector<std::uint64_t> expected(iterations);
        std::iota(expected.begin(), expected.end(), 0);
        CHECK(all == expected);
      }
      // The clients end with the server's final parameters.
      std::vector<float> final_w = w;
      MPI_Bcast(final_w.data(), static_cast<int>(count), MPI_FLOAT, 0, MPI_COMM_WORLD);
      CHECK(std::memcmp(final_w.data(), w.data(), count * sizeof(float)) == 0);
    }
  }

  TEST_CASE("the staleness bound holds: a slow client's old diffs are redone or dropped") {
    const world job;
    if (job.ranks < 3) return;  // one client is never behind itself
    const convex_problem problem(64);
    const int slow_rank = job.ranks - 1;
    for (const auto policy : {crema::mpi::stale_diff::drop, crema::mpi::stale_diff::refresh}) {
      CAPTURE(static_cast<int>(policy));
      auto options = fast_options();
      options.wait = 20ms;  // the updates do not wait for the slow client
      options.max_staleness = 1;
      options.on_stale = policy;
      std::vector<float> w(64, 0.0f);
      std::vector<std::uint64_t> answered;
      if (job.rank == 0) {
        crema::mpi::parameter_server<float> server(MPI_COMM_WORLD, w, {}, options);
        const auto& stats = server.serve(150);
        for (const auto& client : stats.clients) {
          CAPTURE(client.rank);
          CHECK(client.max_applied_staleness <= 1);
          if (client.rank == slow_rank) {
            CHECK(client.max_staleness > 1);
            CHECK(client.late > 0);
            if (policy == crema::mpi::stale_diff::drop) {
              CHECK(client.dropped > 0);
            } else {
              CHECK(client.refreshed > 0);
            }
          }
        }
      } else {
        crema::mpi::ps_client<float> client(MPI_COMM_WORLD, w, options);
        answered = run_client(client, problem, w, job.rank == slow_rank ? 150ms : 1ms);
        if (job.rank == slow_rank && policy == crema::mpi::stale_diff::refresh) {
          // Redone: the same iteration came back on newer parameters.
          CHECK(client.stats().refreshed > 0);
          CHECK(std::adjacent_find(answered.begin(), answered.end()) != answered.end());
        }
      }
      gather_iterations(job, answered);  // keeps the ranks in step
    }
  }

  TEST_CASE("a client that goes silent mid-run leaves the server running and reports it") {
    const world job;
    if (job.ranks < 3) return;  // the others go on without it
    const convex_problem problem(64);
    const int silent_rank = job.ranks - 1;
    auto options = fast_options();
    options.wait = 50ms;
    options.lost_after = 400ms;
    std::vector<float> w(64, 0.0f);
    if (job.rank == 0) {
      crema::mpi::parameter_server<float> server(MPI_COMM_WORLD, w, {}, options);
      const auto started = std::chrono::steady_clock::now();
      const auto& stats = server.serve(200);
      CHECK(std::chrono::steady_clock::now() - started < 20s);
      std::uint64_t applied = 0;
      for (const auto& client : stats.clients) {
        CAPTURE(client.rank);
        applied += client.applied;
        CHECK(client.lost == (client.rank == silent_rank));
        if (client.rank == silent_rank) {
          CHECK(client.times_lost == 1);
          CHECK(client.late > 0);  // late first, then lost
        }
      }
      CHECK(stats.iterations_handed_again == 1);  // its iteration went to another client
      CHECK(applied == 200);
      MPI_Barrier(MPI_COMM_WORLD);
    } else if (job.rank == silent_rank) {
      crema::mpi::ps_client<float> client(MPI_COMM_WORLD, w, options);
      std::vector<float> gradient(w.size());
      auto iteration = client.pull();
      for (int i = 0; i < 3 && iteration; ++i) {
        problem.gradient(*iteration, w, gradient);
        iteration = client.exchange(gradient);
      }
      REQUIRE(iteration);
      // Alive, but silent until the others are done; then it hears of the shutdown.
      MPI_Barrier(MPI_COMM_WORLD);
      const auto before = w;
      // Awake again, it answers its iteration (dropped: it was lost, and the server is gone) and
      // hears of the shutdown.
      problem.gradient(*iteration, w, gradient);
      CHECK(!client.exchange(gradient));
      CHECK(w == before);  // a lost client is not sent the final parameters
    } else {
      crema::mpi::ps_client<float> client(MPI_COMM_WORLD, w, options);
      run_client(client, problem, w, 2ms);
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }

  TEST_CASE(
      "a client lost in the middle of its diff, then back, writes none of it where the server "
      "reads the next") {
    // Over TCP, a message past the eager size goes out in pieces only while its sender is inside
    // MPI: a client that sleeps after starting its push stalls it. The server gives up on the
    // message and loses the client; when the client wakes, the rest of the message still arrives,
    // into the buffer the server had posted for it. The mpi.ps_over_tcp test runs this case.
    const world job;
    const char* transports = std::getenv("OMPI_MCA_btl");
    if (job.ranks < 3 || transports == nullptr || std::string_view(transports) != "tcp,self") {
      return;
    }
    constexpr std::size_t count = std::size_t{1} << 18;  // a 1 MiB diff, 512 KiB in binary16
    constexpr std::uint64_t iterations = 200;
    const int stalled_rank = job.ranks - 1;
    auto options = fast_options();
    options.wait = 50ms;
    options.lost_after = 10s;
    options.timeout = 20s;  // the clients wait for the server while it waits for the stalled one
    std::vector<float> w(count, 0.0f);
    if (job.rank == 0) {
      options.timeout = 500ms;  // its wait for the rest of a message it began to receive
      // Each diff is all ones: every update adds exactly one to every parameter.
      crema::mpi::parameter_server<float, crema::mpi::add_diff> server(MPI_COMM_WORLD, w, {},
                                                                       options);
      const auto& stats = server.serve(iterations);
      for (const auto& client : stats.clients) {
        CAPTURE(client.rank);
        if (client.rank == stalled_rank) {
          CHECK(client.times_lost == 1);
          CHECK(client.applied == 0);
        } else {
          CHECK(client.times_lost == 0);
          CHECK(client.applied > 0);
        }
      }
      const auto expected = static_cast<float>(stats.version);
      CHECK(std::count(w.begin(), w.end(), expected) == static_cast<std::ptrdiff_t>(count));
    } else if (job.rank == stalled_rank) {
      // Its diff is the server's first, and smaller than the others' (half the bytes): the
      // server's receive buffer grows, and moves, for the next.
      options.diffs = crema::compression{}.with_fp16();
      crema::mpi::ps_client<float> client(MPI_COMM_WORLD, w, options);
      REQUIRE(client.pull());
      client.push(std::vector<float>(count, 1.0f));
      std::this_thread::sleep_for(1500ms);  // outside MPI: the rest of the diff waits
      CHECK_FALSE(client.pull());           // its diff goes out now; then it hears of the shutdown
    } else {
      crema::mpi::ps_client<float> client(MPI_COMM_WORLD, w, options);
      const std::vector<float> ones(count, 1.0f);
      auto iteration = client.pull();
      std::this_thread::sleep_for(200ms);  // the stalled client's diff comes first
      for (; iteration; iteration = client.exchange(ones)) std::this_thread::sleep_for(20ms);
    }
    MPI_Barrier(MPI_COMM_WORLD);
  }

  TEST_CASE("a silent server spends its clients: each raises mpi_error within its timeout") {
    const world job;
    if (job.ranks < 2) return;
    auto options = fast_options();
    options.wait = 100ms;
    options.timeout = 600ms;
    std::vector<float> w(16, 0.0f);
    if (job.rank == 0) {
      crema::mpi::parameter_server<float> server(MPI_COMM_WORLD, w, {}, options);
      MPI_Barrier(MPI_COMM_WORLD);  // never serves
    } else {
      crema::mpi::ps_client<float> client(MPI_COMM_WORLD, w, options);
      const std::string silent =
          fmt::format("rank {} heard nothing from the server, rank 0, within 600 ms", job.rank);
      const auto started = std::chrono::steady_clock::now();
      CHECK_THROWS_WITH_AS(client.pull(), doctest::Contains(silent.c_str()), crema::mpi_error);
      const auto took = std::chrono::steady_clock::now() - started;
      CHECK(took >= 600ms);
      CHECK(took < 3s);
      // Spent: every later call names that failure at once, rather than wait on a session whose
      // reply may be half-way.
      const std::string spent =
          fmt::format("rank {} cannot pull after its session failed: {}", job.rank, silent);
      const auto again = std::chrono::steady_clock::now();
      CHECK_THROWS_WITH_AS(client.pull(), doctest::Contains(spent.c_str()), crema::mpi_error);
      CHECK(std::chrono::steady_clock::now() - again < 300ms);
      CHECK_THROWS_WITH_AS(client.push(std::vector<float>(w.size())),
                           doctest::Contains("cannot push after its session failed"),
                           crema::mpi_error);
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }

  TEST_CASE("a client whose parameters differ in size is refused on every rank, by name") {
    const world job;
    if (job.ranks < 2) return;
    const auto options = fast_options();
    std::vector<float> w(job.rank == 1 ? 17 : 16, 0.0f);
    const std::string expected =
        "rank 1 has 17 parameters of 4 bytes; the server on rank 0 has 16 of 4 bytes";
    const crema::test::traced_comm comm;
    if (job.rank == 0) {
      crema::mpi::parameter_server<float> server(comm.get(), w, {}, options);
      CHECK_THROWS_WITH_AS(server.serve(10), doctest::Contains(expected.c_str()), crema::mpi_error);
    } else {
      crema::mpi::ps_client<float> client(comm.get(), w, options);
      // A client that got work before the refusal answers it; then it hears the refusal.
      std::vector<float> gradient(w.size());
      const auto refused = [&] {
        for (auto iteration = client.pull(); iteration; iteration = client.exchange(gradient)) {
        }
      };
      CHECK_THROWS_WITH_AS(refused(), doctest::Contains(expected.c_str()), crema::mpi_error);
    }
    // Server and clients alike free the communicator they made, refused or not.
    CHECK(comm.duplicates() == 1);
    CHECK(comm.duplicates_freed() == 1);
    MPI_Barrier(MPI_COMM_WORLD);
  }

  TEST_CASE("a push without work, or a second pull before the push, is refused, not a hang") {
    const world job;
    if (job.ranks < 2) return;
    auto options = fast_options();
    options.wait = 5s;
    std::vector<float> w(8, 0.0f);
    int checked = 0;  // clients that got work and pulled twice
    if (job.rank == 0) {
      crema::mpi::parameter_server<float> server(MPI_COMM_WORLD, w, {}, options);
      server.serve(4 * static_cast<std::uint64_t>(job.ranks - 1));
    } else {
      crema::mpi::ps_client<float> client(MPI_COMM_WORLD, w, options);
      const std::vector<float> gradient(8, 1.0f);
      CHECK_THROWS_WITH_AS(client.push(gradient), doctest::Contains("pull() first"),
                           crema::state_error);
      for (auto iteration = client.pull(); iteration; iteration = client.exchange(gradient)) {
        if (checked++ > 0) continue;
        CHECK_THROWS_WITH_AS(
            client.pull(),
            doctest::Contains(
                fmt::format("pulls again before it pushed the diff of iteration {}", *iteration)
                    .c_str()),
            crema::state_error);
      }
      CHECK_THROWS_AS(client.push(gradient), crema::state_error);
    }
    int clients_checked = 0;
    checked = checked > 0 ? 1 : 0;
    MPI_Reduce(&checked, &clients_checked, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD);
    if (job.rank == 0) CHECK(clients_checked >= 1);
  }
}
