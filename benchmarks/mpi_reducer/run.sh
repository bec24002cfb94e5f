#!/usr/bin/env bash
# crema's MPI reducer beside MPI_Allreduce: 2 ranks and 4 ranks of one participant each (the
# wrapper must cost nothing: same buffers, same job), then 2 ranks x 2 participants (the
# hierarchical path) beside flat MPI over 4 ranks. JSON of each job next to the build.
#   benchmarks/mpi_reducer/run.sh [build dir, default build/release]
set -euo pipefail
build=${1:-build/release}
program="$build/benchmarks/crema-bench-mpi-reducer"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out="$build/benchmarks"
echo "== 2 ranks x 1 participant"
mpirun --oversubscribe -np 2 "$program" --local=1 --json="$out/mpi_reducer-2x1.json"
echo "== 4 ranks x 1 participant (flat)"
mpirun --oversubscribe -np 4 "$program" --local=1 --json="$out/mpi_reducer-4x1.json"
echo "== 2 ranks x 2 participants (hierarchical: compare with flat MPI over 4 ranks above)"
mpirun --oversubscribe -np 2 "$program" --local=2 --json="$out/mpi_reducer-2x2.json"
