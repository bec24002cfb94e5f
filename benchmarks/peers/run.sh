#!/usr/bin/env bash
# crema-feed beside PyTorch's DataLoader on the same Caffe LMDBs, in one run (the issue's two
# cases: 50,000 x 3x32x32, crop 28, batch 64; 5,000 x 3x256x256, crop 224, batch 32; mirror,
# mean values and scale in both; crema with 1 and 2 producers on as many threads, the median of
# 3 runs of 5 epochs; PyTorch with 0, 1 and 2 workers, the median of 3 epochs each). Installs
# Debian's python3-torch, python3-lmdb, python3-protobuf and protobuf-compiler when missing (not
# CI's job: run it by hand). Prints each figure and the ratio to PyTorch's best; writes every
# JSON line to OUT (default benchmarks-peers.json), which benchmarks/plots/draw.py draws.
#   benchmarks/peers/run.sh [BUILD_DIR] [OUT]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../../build/release}
out=${2:-benchmarks-peers.json}
bash "$here/../../tools/install-deps.sh" python3-torch python3-lmdb python3-protobuf \
  protobuf-compiler python3-numpy
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
protoc --proto_path="$here" --python_out="$work" "$here/datum.proto"
lmdb_tool=$build/examples/crema-lmdb
feed_tool=$build/examples/crema-feed
: >"$out"
echo "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores"
run_case() {
  local name=$1 count=$2 shape=$3 crop=$4 batch=$5
  local db=$work/$name
  "$lmdb_tool" synth "$db" --count "$count" --shape "$shape" >/dev/null
  local best=0 threads crema_rates=()
  declare -A crema_rate
  for threads in 1 2; do
    crema_rates=()
    for _ in 1 2 3; do  # three runs; the median counts (this class of machine is noisy)
      local crema
      crema=$("$feed_tool" "$db" --batch "$batch" --crop "$crop" --mirror \
        --mean-values 104,117,123 --scale 0.017 --producers "$threads" --threads "$threads" \
        --epochs 5 --json)
      echo "$crema" | sed "s/^{/{\"case\": \"$name\", /" >>"$out"
      crema_rates+=("$(echo "$crema" | python3 -c 'import json,sys; print(json.load(sys.stdin)["samples_per_s"])')")
    done
    crema_rate[$threads]=$(python3 -c "import statistics; print(statistics.median([$(IFS=,; echo "${crema_rates[*]}")]))")
  done
  while read -r line; do
    echo "$line" | sed "s/^{/{\"case\": \"$name\", /" >>"$out"
    local rate workers
    rate=$(echo "$line" | python3 -c 'import json,sys; print(json.load(sys.stdin)["samples_per_s"])')
    workers=$(echo "$line" | python3 -c 'import json,sys; print(json.load(sys.stdin)["workers"])')
    printf '  %-6s pytorch, %d workers: %12.0f samples/s\n' "$name" "$workers" "$rate"
    best=$(python3 -c "print(max($best, $rate))")
  done < <(/usr/bin/python3 "$here/pytorch_feed.py" "$db" --batch "$batch" --crop "$crop" \
             --proto-module-dir "$work")
  for threads in 1 2; do
    printf '  %-6s crema-feed, %d producer(s) on as many threads: %12.0f samples/s; ' \
      "$name" "$threads" "${crema_rate[$threads]}"
    printf 'ratio = crema / best PyTorch = %.1f\n' \
      "$(python3 -c "print(${crema_rate[$threads]} / $best)")"
  done
  rm -rf "$db"
}
run_case small 50000 3x32x32 28 64
run_case large 5000 3x256x256 224 32
echo "figures in $out"
