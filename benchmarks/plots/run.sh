#!/usr/bin/env bash
# Runs the benchmarks behind docs/performance.md's plots (medians of 5 repetitions, each figure
# beside its baseline in the same run), keeps their JSON in RESULTS, then draws the PNGs into
# docs/images with draw.py. Installs gnuplot-nox when missing; --peers also runs
# benchmarks/peers/run.sh (PyTorch's DataLoader, installed from Debian; several minutes).
#   benchmarks/plots/run.sh [BUILD_DIR, default build/release] [RESULTS, default
#   benchmark-results] [--peers]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build/release}
results=${2:-benchmark-results}
peers=${3:-}
command -v gnuplot >/dev/null || bash "$here/../../tools/install-deps.sh" gnuplot-nox
mkdir -p "$results"
repeat=(--benchmark_repetitions=5 --benchmark_report_aggregates_only=true
        --benchmark_out_format=json)
for scenario in pipeline_handoff pipeline caffe_data_layer; do
  "$build/benchmarks/crema-bench-$scenario" "${repeat[@]}" \
    --benchmark_out="$results/$scenario.json"
done
CREMA_MPI_RESULTS=$results/mpi_allreduce.txt "$here/../reducer/compare_with_mpi.sh" "$build" \
  "${repeat[@]}" --benchmark_out="$results/reducer.json"
if [[ $peers == --peers ]]; then
  "$here/../peers/run.sh" "$build" "$results/peers.json"
fi
"$here/draw.py" "$results"
