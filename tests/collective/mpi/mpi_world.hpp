#pragma once

// This rank and the number of ranks of the MPI test job; what SIGPIPE does in it.
#include <mpi.h>
#include <signal.h>

#include <deque>

namespace crema::test {

struct mpi_world {
  int rank = 0;
  int ranks = 1;
  mpi_world() {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  }
};

// A duplicate of MPI_COMM_WORLD that counts the duplicates made of it and freed again: it
// carries an attribute that MPI_Comm_dup copies into each duplicate (the copy callback) and that
// MPI_Comm_free deletes from it (the delete callback). For checking that a component frees the
// communicator it made, whatever ends it.
class traced_comm {
 public:
  traced_comm() {
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    MPI_Comm_create_keyval(copied, deleted, &keyval_, nullptr);
    MPI_Comm_set_attr(comm_, keyval_, &counts_);
  }
  traced_comm(const traced_comm&) = delete;
  traced_comm& operator=(const traced_comm&) = delete;
  ~traced_comm() {
    MPI_Comm_free(&comm_);
    MPI_Comm_free_keyval(&keyval_);
  }

  [[nodiscard]] MPI_Comm get() const noexcept { return comm_; }
  [[nodiscard]] int duplicates() const noexcept { return counts_.copied; }
  [[nodiscard]] int duplicates_freed() const noexcept { return counts_.deleted; }

 private:
  struct counts {
    int copied = 0;
    int deleted = 0;
  };
  // Kept to the end of the program: a duplicate a component leaves to MPI keeps the attribute,
  // and MPI_Finalize may call back with it.
  static counts& new_counts() {
    static std::deque<counts> all;
    return all.emplace_back();
  }
  static int copied(MPI_Comm, int, void*, void* value, void* copy, int* keep) {
    ++static_cast<counts*>(value)->copied;
    *static_cast<void**>(copy) = value;
    *keep = 1;
    return MPI_SUCCESS;
  }
  static int deleted(MPI_Comm, int, void* value, void*) {
    ++static_cast<counts*>(value)->deleted;
    return MPI_SUCCESS;
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int keyval_ = MPI_KEYVAL_INVALID;
  counts& counts_ = new_counts();
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
