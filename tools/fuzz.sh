#!/usr/bin/env bash
# Builds the fuzz preset and runs every libFuzzer target for SECONDS (default 60) at once, each
# over a temporary copy of its corpus in fuzz/corpus/<name>/ (the repository's corpus is not
# changed). Exits non-zero if a target finds anything; the finding is left in the work folder,
# whose path is printed.
#   tools/fuzz.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz
work=$(mktemp -d)
pids=()
names=()
for corpus in fuzz/corpus/*/; do
  name=$(basename "$corpus")
  if [[ ! -x build/fuzz/fuzz/crema-fuzz-$name ]]; then
    echo "fuzz: $name skipped (its component is off in this build)"
    continue
  fi
  mkdir -p "$work/$name/corpus" "$work/$name/findings"
  cp "$corpus"* "$work/$name/corpus/"
  ( cd "$work/$name/findings" &&
    "$OLDPWD/build/fuzz/fuzz/crema-fuzz-$name" -max_total_time="$seconds" -print_final_stats=1 \
      -rss_limit_mb=2048 "$work/$name/corpus" >"$work/$name/log" 2>&1 ) &
  pids+=($!)
  names+=("$name")
done
failed=0
for i in "${!pids[@]}"; do
  name=${names[$i]}
  if wait "${pids[$i]}"; then
    echo "fuzz: $name ok: $(grep -E '^stat::number_of_executed_units' "$work/$name/log" | tail -1)"
  else
    failed=1
    echo "fuzz: $name FOUND SOMETHING (log and reproducer in $work/$name):"
    tail -40 "$work/$name/log"
  fi
done
if ((failed == 0)); then rm -rf "$work"; fi
exit "$failed"
