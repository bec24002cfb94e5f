#!/bin/bash
# Instructions per batch in the pipeline's hot path, counted by callgrind (the same from run to run,
# where timings are not): one producer, one consumer, 20,000 batches of 64 records.
#   benchmarks/pipeline/count_instructions.sh [BUILD_DIR] [OUT.json]
set -euo pipefail
build=${1:-build/release}
here=$(cd "$(dirname "$0")" && pwd)
batches=20000
profile=$(mktemp /tmp/crema-callgrind.XXXXXX)
trap 'rm -f "$profile"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$profile" --compress-strings=yes \
  "$build/benchmarks/crema-bench-pipeline-instructions" "$batches" 2>/dev/null
python3 "$here/count_instructions.py" "$profile" "$batches" ${2:+--json "$2"}
