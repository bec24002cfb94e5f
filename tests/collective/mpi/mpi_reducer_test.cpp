// The MPI reducer across the ranks of one job (run by CTest with 1, 2 and 4 ranks): crema's tree
// across ranks gives the single-process reducer's bits over the joined tree; MPI_Allreduce gives
// the same within rounding; ranks that disagree or go silent raise mpi_error naming each other;
// p2p_sync over MPI trains to the host threads' weights, bit for bit.
#include <crema/collective/mpi/mpi_reducer.hpp>
#include <crema/collective/p2p_sync.hpp>

#include "collective/mpi/mpi_world.hpp"
#include "collective/reference.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

using world = crema::test::mpi_world;

crema::tree_topology local_tree(std::size_t local) {
  std::vector<int> ids(local);
  std::iota(ids.begin(), ids.end(), 0);
  return crema::tree_topology::build(ids, [](int, int) { return true; });
}

// The inputs of every participant of the job; this rank's are rank * local .. + local - 1.
std::vector<std::vector<float>> job_inputs(std::size_t participants, std::size_t size,
                                           std::uint32_t seed) {
  return crema::test::make_inputs(participants, size, seed);
}

std::vector<std::vector<float>> mine(const std::vector<std::vector<float>>& inputs, int rank,
                                     std::size_t local) {
  return {inputs.begin() + static_cast<std::ptrdiff_t>(rank) * static_cast<std::ptrdiff_t>(local),
          inputs.begin() +
              (static_cast<std::ptrdiff_t>(rank) + 1) * static_cast<std::ptrdiff_t>(local)};
}

// Copies `from` into `buffers` in place: reducers keep spans of them.
void refill(std::vector<std::vector<float>>& buffers, const std::vector<std::vector<float>>& from) {
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    std::copy(from[i].begin(), from[i].end(), buffers[i].begin());
  }
}

void own_sigpipe_handler(int) {}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

}  // namespace

TEST_SUITE("mpi_reducer") {
  TEST_CASE(
      "a reducer keeps its rank alive when a peer's connection breaks: SIGPIPE left at its "
      "default is ignored, a handler of the program's own is kept") {
    const world job;
    std::vector<std::vector<float>> buffers(1, std::vector<float>(4, 1.0f));
    const auto make_and_use = [&] {
      crema::mpi::mpi_reducer<float> reducer(MPI_COMM_WORLD, local_tree(1),
                                             crema::test::spans_of(buffers), {.timeout = 10s});
      reducer.allreduce();
    };
    const crema::test::sigpipe_restored restore;
    std::signal(SIGPIPE, own_sigpipe_handler);
    make_and_use();
    CHECK((crema::test::sigpipe_action() == own_sigpipe_handler));
    std::signal(SIGPIPE, SIG_DFL);
    make_and_use();
    CHECK((crema::test::sigpipe_action() == SIG_IGN));
    std::raise(SIGPIPE);  // ends the rank at the default action
    CHECK(std::abs(buffers[0][0] - 1.0f * static_cast<float>(job.ranks) * job.ranks) < 1e-3f);
  }

  TEST_CASE(
      "crema's tree across ranks gives the single-process reducer's bits over the joined "
      "tree") {
    const world job;
    for (const std::size_t local : {1U, 2U, 3U}) {
      for (const std::size_t size : {0U, 1U, 7919U, (1U << 20) + 3U}) {
        CAPTURE(local);
        CAPTURE(size);
        const std::size_t all = static_cast<std::size_t>(job.ranks) * local;
        const auto inputs = job_inputs(all, size, 5);
        auto buffers = mine(inputs, job.rank, local);
        crema::mpi::mpi_reducer<float> reducer(MPI_COMM_WORLD, local_tree(local),
                                               crema::test::spans_of(buffers),
                                               {.chunk_elements = 100000});
        CHECK(reducer.participants() == all);
        // The same job in one process, over the joined tree.
        auto everyone = inputs;
        crema::device_tree_reducer<float> single(reducer.topology(),
                                                 crema::test::spans_of(everyone));

        reducer.allreduce(crema::reduction::average);
        single.allreduce(crema::reduction::average);
        for (std::size_t i = 0; i < local; ++i) {
          CHECK(same_bits(buffers[i], everyone[reducer.global(i)]));
        }

        refill(buffers, mine(inputs, job.rank, local));
        refill(everyone, inputs);
        const std::size_t root = all - 1;
        reducer.reduce(root, crema::reduction::sum);
        single.reduce(root, crema::reduction::sum);
        for (std::size_t i = 0; i < local; ++i) {
          CHECK(same_bits(buffers[i], everyone[reducer.global(i)]));  // the others untouched
        }

        if (size > 10) {
          refill(buffers, mine(inputs, job.rank, local));
          refill(everyone, inputs);
          reducer.reduce_range(0, 3, size - 5, crema::reduction::average);
          single.reduce_range(0, 3, size - 5, crema::reduction::average);
          for (std::size_t i = 0; i < local; ++i) {
            CHECK(same_bits(buffers[i], everyone[reducer.global(i)]));
          }
        }

        refill(buffers, mine(inputs, job.rank, local));
        refill(everyone, inputs);
        reducer.broadcast(all / 2);
        single.broadcast(all / 2);
        for (std::size_t i = 0; i < local; ++i) {
          CHECK(same_bits(buffers[i], everyone[reducer.global(i)]));
        }
      }
    }
  }

  TEST_CASE("MPI_Allreduce across ranks gives the sum within rounding, and exactly on integers") {
    const world job;
    const std::size_t local = 2;
    const std::size_t all = static_cast<std::size_t>(job.ranks) * local;
    const auto inputs = job_inputs(all, 5003, 9);
    auto buffers = mine(inputs, job.rank, local);
    crema::mpi::mpi_reducer<float> reducer(MPI_COMM_WORLD, local_tree(local),
                                           crema::test::spans_of(buffers),
                                           {.across = crema::mpi::across_ranks::allreduce});
    reducer.allreduce(crema::reduction::sum);
    for (std::size_t e = 0; e < 5003; e += 97) {
      double expected = 0;
      for (const auto& input : inputs) expected += input[e];
      for (const auto& buffer : buffers) {
        CHECK(buffer[e] == doctest::Approx(expected).epsilon(1e-4).scale(1e4));
      }
    }
    // Integer-valued floats: every order gives the same sum.
    std::vector<std::vector<float>> integers(local, std::vector<float>(1000));
    for (std::size_t i = 0; i < local; ++i) {
      for (std::size_t e = 0; e < 1000; ++e) {
        integers[i][e] = static_cast<float>((reducer.global(i) * 7 + e) % 101);
      }
    }
    crema::mpi::mpi_reducer<float> exact(MPI_COMM_WORLD, local_tree(local),
                                         crema::test::spans_of(integers),
                                         {.across = crema::mpi::across_ranks::allreduce});
    exact.allreduce(crema::reduction::sum);
    for (std::size_t e = 0; e < 1000; ++e) {
      float expected = 0;
      for (std::size_t g = 0; g < all; ++g) expected += static_cast<float>((g * 7 + e) % 101);
      CHECK(integers[0][e] == expected);
    }
  }

  TEST_CASE("ranks that call different operations raise mpi_error naming both views") {
    const world job;
    if (job.ranks < 2) return;
    std::vector<std::vector<float>> buffers(1, std::vector<float>(100, 1.0f));
    const crema::test::traced_comm comm;
    auto owned = std::make_unique<crema::mpi::mpi_reducer<float>>(
        comm.get(), local_tree(1), crema::test::spans_of(buffers),
        crema::mpi::reducer_options{.timeout = 10s});
    auto& reducer = *owned;
    const std::size_t end = job.rank == 1 ? 60 : 50;  // rank 1 thinks the bucket is longer
    try {
      reducer.reduce_range(0, 0, end, crema::reduction::sum);
      FAIL("expected an mpi_error");
    } catch (const crema::mpi_error& e) {
      const std::string message = e.what();
      CAPTURE(message);
      CHECK(message.find("ranks disagree: rank 0 was at its reduce(sum) of elements [0, 50)") !=
            std::string::npos);
      CHECK(message.find("rank 1 at its reduce(sum) of elements [0, 60)") != std::string::npos);
    }
    CHECK_THROWS_WITH_AS(reducer.allreduce(), doctest::Contains("issues nothing more"),
                         crema::mpi_error);
    // Every rank answered, and no data moves before ranks agree: nothing is on its way to the
    // reducer's communicator, which is freed with it.
    owned.reset();
    CHECK(comm.duplicates_freed() == 1);
  }

  TEST_CASE("ranks whose buffers differ in size are refused at construction, naming them") {
    const world job;
    if (job.ranks < 2) return;
    std::vector<std::vector<float>> buffers(1, std::vector<float>(job.rank == 1 ? 11 : 10));
    const crema::test::traced_comm comm;
    CHECK_THROWS_WITH_AS(
        (crema::mpi::mpi_reducer<float>(comm.get(), local_tree(1), crema::test::spans_of(buffers),
                                        {.timeout = 10s})),
        doctest::Contains("rank 1 at its construct of elements [0, 11)"), crema::mpi_error);
    // The communicator it had made for itself is freed, though no destructor ran.
    CHECK(comm.duplicates() == 1);
    CHECK(comm.duplicates_freed() == 1);
  }

  TEST_CASE("a reducer frees the communicator it made when it goes, and only then") {
    const world job;
    std::vector<std::vector<float>> buffers(1, std::vector<float>(5, 1.0f));
    const crema::test::traced_comm comm;
    {
      crema::mpi::mpi_reducer<float> reducer(comm.get(), local_tree(1),
                                             crema::test::spans_of(buffers), {.timeout = 10s});
      reducer.allreduce();
      CHECK(comm.duplicates() == 1);
      CHECK(comm.duplicates_freed() == 0);
    }
    CHECK(comm.duplicates_freed() == 1);
    CHECK(buffers[0][0] == static_cast<float>(job.ranks));
  }

  TEST_CASE("a rank that goes silent makes the others fail within their timeout, naming it") {
    const world job;
    if (job.ranks < 2) return;
    std::vector<std::vector<float>> buffers(1, std::vector<float>(100, 1.0f));
    const crema::test::traced_comm comm;
    auto reducer = std::make_unique<crema::mpi::mpi_reducer<float>>(
        comm.get(), local_tree(1), crema::test::spans_of(buffers),
        crema::mpi::reducer_options{.timeout = 500ms});
    const int silent = job.ranks - 1;
    if (job.rank == silent) std::this_thread::sleep_for(2500ms);  // alive, but not calling
    const auto asked = std::chrono::steady_clock::now();
    try {
      reducer->allreduce();
      FAIL("expected an mpi_error");
    } catch (const crema::mpi_error& e) {
      const std::string message = e.what();
      CAPTURE(message);
      if (job.rank == silent) {
        CHECK(message.find("did not hear from rank 0") != std::string::npos);
      } else {
        CHECK(message.find(fmt::format("rank {} did not answer within 500 ms", silent)) !=
              std::string::npos);
        CHECK(std::chrono::steady_clock::now() - asked < 1400ms);  // before the silent one woke
      }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    // A rank given up on may still send: the communicator stays with MPI, so that its id is
    // never given to a later one, nor the late messages with it.
    reducer.reset();
    CHECK(comm.duplicates() == 1);
    CHECK(comm.duplicates_freed() == 0);
  }

  TEST_CASE("a rank that is only slow is waited for up to the timeout, and the sums are right") {
    const world job;
    if (job.ranks < 2) return;
    std::vector<std::vector<float>> buffers(1, std::vector<float>(1000));
    crema::mpi::mpi_reducer<float> reducer(MPI_COMM_WORLD, local_tree(1),
                                           crema::test::spans_of(buffers), {.timeout = 1500ms});
    for (int step = 0; step < 3; ++step) {
      std::fill(buffers[0].begin(), buffers[0].end(), static_cast<float>(job.rank + 1));
      // The last rank comes late to each operation, by half the timeout.
      if (job.rank == job.ranks - 1) std::this_thread::sleep_for(750ms);
      if (step == 1) {
        reducer.broadcast(0);
        CHECK(buffers[0].back() == 1.0f);
      } else {
        reducer.allreduce();
        CHECK(buffers[0].back() == static_cast<float>(job.ranks * (job.ranks + 1) / 2));
      }
    }
  }

  TEST_CASE("shards of ranks and their consumers cover the data once") {
    std::vector<bool> taken(4 * 3, false);
    for (std::size_t rank = 0; rank < 4; ++rank) {
      for (std::size_t consumer = 0; consumer < 3; ++consumer) {
        const auto [shard, shards] = crema::mpi::shard_of(rank, 4, 3, consumer);
        CHECK(shards == 12);
        CHECK_FALSE(taken[shard]);
        taken[shard] = true;
      }
    }
  }
}

TEST_SUITE("p2p_sync over mpi_reducer") {
  TEST_CASE(
      "data-parallel SGD across ranks reaches the host threads' weights bit for bit, buckets "
      "marked in any order") {
    const world job;
    const std::size_t local = 2;
    const std::size_t all = static_cast<std::size_t>(job.ranks) * local;
    constexpr std::size_t weights = 12;
    constexpr int steps = 30;
    // Participant g's gradient at step s: a fixed convex problem, w - target(g, s).
    const auto target = [](std::size_t g, int step, std::size_t j) {
      return static_cast<float>((g * 13 + static_cast<std::size_t>(step) * 7 + j * 3) % 17) / 8.0f;
    };
    const auto train = [&](auto& sync, std::vector<std::vector<float>>& parameters,
                           std::vector<std::vector<float>>& gradients, std::size_t first,
                           std::size_t count, std::size_t root) {
      std::vector<std::jthread> threads;
      for (std::size_t i = 0; i < count; ++i) {
        threads.emplace_back([&, i] {
          const std::size_t g = first + i;
          for (int step = 0; step < steps; ++step) {
            sync.on_start(g);
            for (std::size_t j = 0; j < weights; ++j) {
              gradients[i][j] = parameters[i][j] - target(g, step, j);
            }
            // Buckets finish in a different order on every participant.
            for (std::size_t k = 0; k < 3; ++k) sync.on_bucket_ready(g, (g + k) % 3);
            sync.on_gradients_ready(g);
            if (g == root) {
              for (std::size_t j = 0; j < weights; ++j) {
                parameters[i][j] -= 0.5f * gradients[i][j];
              }
            }
          }
        });
      }
    };
    const std::vector<std::size_t> buckets{4, 4, 4};
    // Across ranks.
    std::vector<std::vector<float>> parameters(local, std::vector<float>(weights, 0.0f));
    std::vector<std::vector<float>> gradients(local, std::vector<float>(weights, 0.0f));
    crema::mpi::mpi_reducer<float> parameter_sync(MPI_COMM_WORLD, local_tree(local),
                                                  crema::test::spans_of(parameters));
    crema::mpi::mpi_reducer<float> gradient_sync(MPI_COMM_WORLD, local_tree(local),
                                                 crema::test::spans_of(gradients));
    const std::size_t root = 0;
    {
      crema::p2p_sync<crema::mpi::mpi_reducer<float>> sync(parameter_sync, gradient_sync, root,
                                                           {.bucket_sizes = buckets});
      train(sync, parameters, gradients, parameter_sync.global(0), local, root);
    }
    parameter_sync.broadcast(root);  // everyone gets the final weights
    // The same job in one process, on host threads, over the joined tree.
    std::vector<std::vector<float>> host_parameters(all, std::vector<float>(weights, 0.0f));
    std::vector<std::vector<float>> host_gradients(all, std::vector<float>(weights, 0.0f));
    {
      crema::host_p2p_sync<float> sync(
          parameter_sync.topology(), crema::test::spans_of(host_parameters),
          crema::test::spans_of(host_gradients), {.bucket_sizes = buckets});
      REQUIRE(sync.root() == root);
      train(sync, host_parameters, host_gradients, 0, all, root);
    }
    CHECK(same_bits(parameters[0], host_parameters[root]));
    // Bucketed equals unbucketed, across ranks too.
    std::vector<std::vector<float>> whole_parameters(local, std::vector<float>(weights, 0.0f));
    std::vector<std::vector<float>> whole_gradients(local, std::vector<float>(weights, 0.0f));
    {
      crema::mpi::mpi_reducer<float> whole_parameter_sync(MPI_COMM_WORLD, local_tree(local),
                                                          crema::test::spans_of(whole_parameters));
      crema::mpi::mpi_reducer<float> whole_gradient_sync(MPI_COMM_WORLD, local_tree(local),
                                                         crema::test::spans_of(whole_gradients));
      {
        crema::p2p_sync<crema::mpi::mpi_reducer<float>> sync(
            whole_parameter_sync, whole_gradient_sync, root, {.bucket_sizes = {weights}});
        std::vector<std::jthread> threads;
        for (std::size_t i = 0; i < local; ++i) {
          threads.emplace_back([&, i] {
            const std::size_t g = whole_parameter_sync.global(i);
            for (int step = 0; step < steps; ++step) {
              sync.on_start(g);
              for (std::size_t j = 0; j < weights; ++j) {
                whole_gradients[i][j] = whole_parameters[i][j] - target(g, step, j);
              }
              sync.on_gradients_ready(g);
              if (g == root) {
                for (std::size_t j = 0; j < weights; ++j) {
                  whole_parameters[i][j] -= 0.5f * whole_gradients[i][j];
                }
              }
            }
          });
        }
      }
      whole_parameter_sync.broadcast(root);
    }
    CHECK(same_bits(parameters[0], whole_parameters[0]));
    float distance = 0;
    for (std::size_t j = 0; j < weights; ++j) distance += std::abs(parameters[0][j]);
    CHECK(distance > 0);  // it did train
  }
}
