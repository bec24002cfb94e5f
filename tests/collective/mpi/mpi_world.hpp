#pragma once

// This rank and the number of ranks of the MPI test job; what SIGPIPE does in it.
#include <mpi.h>
#include <signal.h>

namespace crema::test {

struct mpi_world {
  int rank = 0;
  int ranks = 1;
  mpi_world() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  }
};

// The action SIGPIPE has now in this process (SIG_DFL, SIG_IGN or a handler).
inline void (*sigpipe_action())(int) {
  struct sigaction now {};
  ::sigaction(SIGPIPE, nullptr, &now);
  return now.sa_handler;
}

// Puts SIGPIPE's action back as it was when made, however the test ends.
class sigpipe_restored {
 public:
  sigpipe_restored() { ::sigaction(SIGPIPE, nullptr, &before_); }
  sigpipe_restored(const sigpipe_restored&) = delete;
  sigpipe_restored& operator=(const sigpipe_restored&) = delete;
  ~sigpipe_restored() { ::sigaction(SIGPIPE, &before_, nullptr); }

 private:
  struct sigaction before_ {};
};

}  // namespace crema::test
