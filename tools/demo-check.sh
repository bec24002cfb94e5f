#!/usr/bin/env bash
# CI's demo stage: crema-demo in full (2 solvers of 32 images a step), then crema-mpi-train on
# 2 ranks (1 solver each, 32 images) and on 4 ranks (1 solver each, 16 images): the same global
# batch and steps, so each must end within a point of crema-demo's test accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target crema-demo crema-mpi-train
bin=build/release/examples
log=$(mktemp)
"${bin}/crema-demo" --progress=lines | tee "${log}"
accuracy=$(sed -nE 's/^test accuracy: ([0-9.]+)$/\1/p' "${log}")
rm -f "${log}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun -np 2 --oversubscribe "${bin}/crema-mpi-train" --compare-to="${accuracy}"
mpirun -np 4 --oversubscribe "${bin}/crema-mpi-train" --participants=4 --batch=16 \
  --compare-to="${accuracy}"
echo "demo: crema-mpi-train on 2 and 4 ranks within a point of crema-demo's ${accuracy}"
