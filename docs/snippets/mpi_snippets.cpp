// docs/reducer.md's MPI snippet, compiled and run on 2 ranks by the tests (docs.mpi_snippets):
// p2p_sync over two mpi_reducers, two participants a rank, one step.
#include <crema/collective/mpi/mpi_reducer.hpp>
#include <crema/collective/p2p_sync.hpp>

#include <fmt/core.h>
#include <mpi.h>

#include <span>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED,
                  &provided);  // hooks call it from several threads
  int status = 0;
  {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const std::vector<int> ids{0, 1};
    const auto local_tree = crema::tree_topology::flat(ids);
    std::vector<std::vector<float>> weights(2, std::vector<float>(1000, 0.0f));
    std::vector<std::vector<float>> grads(
        2, std::vector<float>(1000, 1.0f + static_cast<float>(rank)));
    if (rank == 0) weights[0].assign(1000, 3.0f);
    const std::vector<std::span<float>> parameter_spans(weights.begin(), weights.end());
    const std::vector<std::span<float>> local_spans(grads.begin(), grads.end());
    crema::mpi::mpi_reducer<float> parameters(MPI_COMM_WORLD, local_tree, parameter_spans);
    crema::mpi::mpi_reducer<float> gradients(MPI_COMM_WORLD, local_tree, local_spans,
                                             {.across = crema::mpi::across_ranks::tree});
    crema::p2p_sync<crema::mpi::mpi_reducer<float>> sync(parameters, gradients, /*root=*/0);
    // rank r's participant i is global participant gradients.global(i); its thread calls the hooks
    {
      std::vector<std::jthread> threads;
      for (std::size_t i = 0; i < 2; ++i) {
        threads.emplace_back([&, i] {
          sync.on_start(gradients.global(i));
          sync.on_gradients_ready(gradients.global(i));
        });
      }
    }
    // Every participant got the root's weights; the root, the average of 1, 1, 2, 2.
    const bool right = weights[1][999] == 3.0f && (rank != 0 || grads[0][0] == 1.5f);
    if (!right) status = 1;
    if (rank == 0) fmt::print("{}\n", right ? "the snippet ran" : "the snippet went wrong");
  }
  MPI_Finalize();
  return status;
}
