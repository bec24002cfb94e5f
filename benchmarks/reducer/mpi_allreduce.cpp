// Open MPI's own MPI_Allreduce over shared memory, participants = ranks: the figure engines get
// from MPI today. Rank 0 prints one line per size: "mpi_allreduce MiB=<m> ranks=<r> seconds=<t>"
// with the median time of one in-place float sum.
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  int ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  for (const long mib : {16L, 64L}) {
    std::vector<float> buffer(static_cast<std::size_t>(mib << 20) / sizeof(float), 1.0f);
    std::vector<double> times;
    for (int repeat = 0; repeat < 7; ++repeat) {
      MPI_Barrier(MPI_COMM_WORLD);
      const double start = MPI_Wtime();
      MPI_Allreduce(MPI_IN_PLACE, buffer.data(), static_cast<int>(buffer.size()), MPI_FLOAT,
                    MPI_SUM, MPI_COMM_WORLD);
      const double took = MPI_Wtime() - start;
      double slowest = 0;
      MPI_Reduce(&took, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
      if (repeat > 0) times.push_back(slowest);  // the first one warms up
    }
    std::sort(times.begin(), times.end());
    if (rank == 0) {
      std::printf("mpi_allreduce MiB=%ld ranks=%d seconds=%.6f\n", mib, ranks,
                  times[times.size() / 2]);
    }
  }
  MPI_Finalize();
}
