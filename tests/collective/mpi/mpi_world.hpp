#pragma once

// This rank and the number of ranks of the MPI test job.
#include <mpi.h>

namespace crema::test {

struct mpi_world {
  int rank = 0;
  int ranks = 1;
  mpi_world() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  }
};

}  // namespace crema::test
