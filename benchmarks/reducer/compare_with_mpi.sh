#!/usr/bin/env bash
# Runs Open MPI's MPI_Allreduce with 2 and 4 ranks, then crema's allreduce benchmark, and prints
# crema's bus bandwidth beside the copy bound and beside Open MPI's, all from this one run.
#   benchmarks/reducer/compare_with_mpi.sh [build dir, default build/release] [benchmark flags]
# CREMA_MPI_RESULTS=FILE keeps Open MPI's lines in FILE (benchmarks/plots/draw.py reads them
# beside the benchmark's --benchmark_out JSON).
set -euo pipefail
build=${1:-build/release}
shift || true
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
results=${CREMA_MPI_RESULTS:-}
if [[ -z $results ]]; then
  results=$(mktemp)
  trap 'rm -f "$results"' EXIT
fi
: >"$results"
for ranks in 2 4; do
  mpirun --oversubscribe -np "$ranks" "$build/benchmarks/crema-bench-mpi-allreduce" >>"$results"
done
"$build/benchmarks/crema-bench-reducer" --mpi_results="$results" "$@"
