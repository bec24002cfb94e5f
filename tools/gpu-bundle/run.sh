#!/usr/bin/env bash
# crema's GPU test bundle: runs every CUDA test, then compute-sanitizer's memcheck, racecheck and
# synccheck over the tests that touch the GPU, then crema-cuda-demo (the main job on the GPU: it
# must reach its test accuracy), then the GPU benchmarks; prints one summary line
# and writes what it found under the results folder (summary.json, one log per step, the
# benchmarks' JSON). Needs the GPU driver, NCCL (beside the CUDA toolkit, on LD_LIBRARY_PATH, or
# in Python's nvidia-nccl wheel) and compute-sanitizer; nothing of the build machine.
#
#   run.sh [--results DIR] [--quick] [--no-tests] [--no-sanitizers] [--no-demo] [--no-benchmarks]
#          [--benchmarks NAMES] [--benchmark-filter REGEX] [--repetitions N] [--no-device-ok]
#          [--timeout SECONDS]
#
#   --results DIR     where logs and JSON go (default: ./gpu-bundle-results)
#   --quick           benchmarks briefly, for a smoke run (their figures then mean little)
#   --no-tests        skip the tests (and compute-sanitizer, which runs them): for a call that
#                     only measures, after one that tested the same bundle
#   --no-sanitizers   skip compute-sanitizer
#   --no-demo         skip crema-cuda-demo
#   --no-benchmarks   skip the benchmarks
#   --benchmarks NAMES only these benchmarks, by their names after crema-gpu-bench- and separated
#                     by commas (data_layer,consumer_cpu), where a session has little GPU time
#   --benchmark-filter REGEX  only the cases of those benchmarks whose names match (Google
#                     Benchmark's --benchmark_filter: '^(crema|host)/data_layer/|/jpeg_input/')
#   --repetitions N   runs of each benchmark case, interleaved at random, their median its figure
#                     (default 5; 1: one run each). Every run is printed as it ends, so that a
#                     benchmark its timeout kills keeps what it measured in its log
#   --no-device-ok    without a GPU, run what needs none and exit 0 (the build machine's check)
#   --timeout SECONDS each program's run at most (default 300; a sanitizer's run counts as one)
#
# Exit status: 0 when everything ran and passed; 1 when something failed; 2 on bad usage; 3 when
# there is no GPU (without --no-device-ok).
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
results=$PWD/gpu-bundle-results
quick=0
run_tests=1
sanitizers=1
demo=1
benchmarks=1
only_benchmarks=""
benchmark_filter=""
no_device_ok=0
limit=300
repetitions_wanted=5
while (($#)); do
  case $1 in
    --results) results=${2:?--results needs a folder}; shift ;;
    --results=*) results=${1#--results=} ;;
    --quick) quick=1 ;;
    --no-tests) run_tests=0 ;;
    --no-sanitizers) sanitizers=0 ;;
    --no-demo) demo=0 ;;
    --no-benchmarks) benchmarks=0 ;;
    --benchmarks) only_benchmarks=${2:?--benchmarks needs names}; shift ;;
    --benchmarks=*) only_benchmarks=${1#--benchmarks=} ;;
    --benchmark-filter) benchmark_filter=${2:?--benchmark-filter needs a regular expression}; shift ;;
    --benchmark-filter=*) benchmark_filter=${1#--benchmark-filter=} ;;
    --repetitions) repetitions_wanted=${2:?--repetitions needs a count}; shift ;;
    --repetitions=*) repetitions_wanted=${1#--repetitions=} ;;
    --no-device-ok) no_device_ok=1 ;;
    --timeout) limit=${2:?--timeout needs seconds}; shift ;;
    --timeout=*) limit=${1#--timeout=} ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$1' (see run.sh --help)" >&2; exit 2 ;;
  esac
  shift
done
[[ $limit =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --timeout wants seconds, not '$limit'" >&2; exit 2; }
[[ $repetitions_wanted =~ ^[1-9][0-9]*$ ]] ||
  { echo "run.sh: --repetitions wants a count from 1, not '$repetitions_wanted'" >&2; exit 2; }
IFS=, read -r -a chosen_benchmarks <<<"$only_benchmarks"
for bench in "${chosen_benchmarks[@]}"; do
  if [[ ! -x $here/bin/crema-gpu-bench-$bench ]]; then
    echo "run.sh: no benchmark '$bench' in this bundle (see $here/bin/crema-gpu-bench-*)" >&2
    exit 2
  fi
done
mkdir -p "$results" || { echo "run.sh: cannot make the results folder '$results'" >&2; exit 2; }
results=$(cd "$results" && pwd)

failures=()   # one line per failed step
notes=()      # what the summary says beside the verdict
fail() { failures+=("$1"); echo "run.sh: FAILED: $1"; }

# NCCL: the kernel tests link it. The loader's cache first, then the usual places, then wheels.
find_nccl() {
  local ldconfig
  ldconfig=$(command -v ldconfig || echo /sbin/ldconfig)
  "$ldconfig" -p 2>/dev/null | grep -q 'libnccl\.so\.2 ' && { echo "system"; return 0; }
  local dirs=()
  [[ -n ${NCCL_HOME:-} ]] && dirs+=("$NCCL_HOME/lib" "$NCCL_HOME/lib64")
  [[ -n ${CUDA_HOME:-} ]] && dirs+=("$CUDA_HOME/lib64" "$CUDA_HOME/lib")
  dirs+=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib)
  IFS=: read -ra from_path <<<"${LD_LIBRARY_PATH:-}"
  dirs+=("${from_path[@]}")
  local python
  for python in python3 /usr/bin/python3; do
    command -v "$python" >/dev/null || continue
    dirs+=("$("$python" -c 'import nvidia.nccl as m; print(list(m.__path__)[0] + "/lib")' \
      2>/dev/null)")
  done
  local dir
  for dir in "${dirs[@]}"; do
    [[ -n $dir && -e $dir/libnccl.so.2 ]] && { echo "$dir"; return 0; }
  done
  return 1
}
if nccl=$(find_nccl); then
  if [[ $nccl == system ]]; then
    echo "run.sh: NCCL from the loader's cache"
  else
    export LD_LIBRARY_PATH="$nccl${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "run.sh: NCCL from $nccl"
  fi
else
  fail "NCCL (libnccl.so.2) not found: set NCCL_HOME, LD_LIBRARY_PATH or install nvidia-nccl"
fi

# The GPU, as crema-gpu-info sees it through the CUDA runtime (exit 3: none).
"$here/bin/crema-gpu-info" --json="$results/gpu.json" | tee "$results/gpu.txt"
info_status=${PIPESTATUS[0]}
device=1
if ((info_status == 3)); then
  device=0
  if ((no_device_ok)); then
    notes+=("no GPU: ran what needs none")
  else
    echo "run.sh: no CUDA device here (see $results/gpu.txt); --no-device-ok runs what needs none"
    exit 3
  fi
elif ((info_status != 0)); then
  fail "crema-gpu-info exited with ${info_status}"
fi
gpu=""
((device)) && gpu=$(sed -n 's/^gpu: //p' "$results/gpu.txt")

# Tests. With a GPU, a test that reports itself skipped for want of one is a failure: the only
# skip allowed is the test of the path without a device.
tests=(crema_cuda_tests crema_cuda_kernel_tests crema_thrust_cpu_tests)
gpu_tests=(crema_cuda_tests crema_cuda_kernel_tests)
if [[ -x $here/bin/crema_nvjpeg_tests ]]; then  # built where nvJPEG was found
  tests+=(crema_nvjpeg_tests)
  gpu_tests+=(crema_nvjpeg_tests)
fi
# Faults made on purpose, each in a child process: never under compute-sanitizer.
if [[ -x $here/bin/crema_cuda_fault_tests ]]; then
  tests+=(crema_cuda_fault_tests)
fi
export CREMA_TEST_DATA_DIR=$here/data  # the photographs the nvJPEG tests decode
passed=0
failed=0
skipped=0
((run_tests)) || tests=()
for test in "${tests[@]}"; do
  log=$results/$test.log
  timeout "$limit" "$here/bin/$test" --no-version >"$log" 2>&1
  status=$?
  summary=$(grep -E '^\[doctest\] test cases:' "$log" | tail -1)
  read -r cases ok bad < <(sed -nE \
    's/.*test cases: *([0-9]+) \| *([0-9]+) passed \| *([0-9]+) failed.*/\1 \2 \3/p' <<<"$summary")
  without_device=$(grep -c '^crema-test-skip: no CUDA device' "$log")
  other_skips=$(grep -c '^crema-test-skip:' "$log")
  other_skips=$((other_skips - without_device))
  echo "run.sh: $test: ${summary:-no doctest summary} (exit $status)"
  if ((status != 0)) || [[ -z $summary ]]; then
    fail "$test (exit $status; $log)"
    # Its log's end, here too: the output of a call whose files do not come back still says what
    # failed (a failed check, or the stack a hung child printed).
    tail -n 40 "$log" | sed 's/^/run.sh:   | /'
  fi
  if ((device && without_device > 0)); then
    fail "$test: $without_device test(s) skipped for want of a device although one is present"
  fi
  passed=$((passed + ${ok:-0} - without_device - other_skips))
  failed=$((failed + ${bad:-0}))
  skipped=$((skipped + without_device + other_skips))
done
if ((run_tests)); then
  notes+=("tests ${passed} passed, ${failed} failed, ${skipped} skipped")
else
  notes+=("tests not run")
fi

# compute-sanitizer over the tests that touch the GPU. The suite "cuda errors provoked on purpose"
# makes CUDA calls fail on purpose; it runs on its own, without the report of API errors (its
# memory accesses are still checked), in the programs that have it; everything else must report
# nothing at all but what NCCL raises and handles inside its own calls (below).
find_sanitizer() {
  local candidate
  for candidate in compute-sanitizer "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer" \
                   /usr/local/cuda/compute-sanitizer/compute-sanitizer; do
    command -v "$candidate" >/dev/null 2>&1 && { command -v "$candidate"; return 0; }
  done
  return 1
}
# How many of `test`'s cases the doctest filter selects.
selected_cases() {
  local test=$1
  shift
  "$here/bin/$test" --no-version --list-test-cases "$@" 2>/dev/null |
    sed -nE 's/^\[doctest\] unskipped test cases passing the current filters: ([0-9]+)$/\1/p'
}
# NCCL looks up every kernel it carries when a communicator starts; those built only for other
# architectures answer cudaErrorNoKernelImageForDevice, which NCCL expects, clears and goes on.
# memcheck reports them as API errors. A run whose every error is such a report (an API error
# whose call came from inside libnccl: the first frame of its host backtrace outside the CUDA
# runtime and driver) passes; prints how many there were, or nothing when the log holds anything
# else.
errors_inside_nccl() {
  awk '
    /^========= Program hit / { api = 1; next }
    api && /Host Frame:/ && !/ in libcuda(rt)?\.so/ { if (/ in libnccl\.so/) nccl++; api = 0 }
    /ERROR SUMMARY: [0-9]+ error/ { match($0, /[0-9]+ error/); total = substr($0, RSTART, RLENGTH) + 0 }
    END { if (total > 0 && total == nccl) print total }
  ' "$1"
}
sanitized=()
if ((sanitizers && device && run_tests)); then
  if sanitizer=$(find_sanitizer); then
    for tool in memcheck racecheck synccheck; do
      tool_ok=1
      for test in "${gpu_tests[@]}"; do
        for part in rest on-purpose; do
          log=$results/$tool-$test-$part.log
          if [[ $part == rest ]]; then
            filter=(--test-suite-exclude='cuda errors provoked on purpose')
            api=explicit
          else
            filter=(--test-suite='cuda errors provoked on purpose')
            api=no
          fi
          # A program without such cases has nothing to run here (the sanitizer would fail a
          # program that makes no CUDA call at all).
          [[ $(selected_cases "$test" "${filter[@]}") == 0 ]] && continue
          # The soaks at their least (60 pipelines): a sanitizer's tool slows every call.
          CREMA_SOAK_RECORDS=0 timeout "$limit" "$sanitizer" --tool "$tool" --error-exitcode 86 \
            --print-limit 1000 \
            --report-api-errors "$api" "$here/bin/$test" --no-version "${filter[@]}" \
            >"$log" 2>&1
          status=$?
          inside_nccl=""
          if ((status == 86)) && [[ $tool == memcheck ]]; then
            inside_nccl=$(errors_inside_nccl "$log")
            if [[ -n $inside_nccl ]]; then
              echo "run.sh: $tool over $test ($part): $inside_nccl API error(s) NCCL raised" \
                "and handled inside its own calls, allowed; $log"
              status=0
            fi
          fi
          # A clean run says so; a sanitizer that could not do its work may still exit 0.
          if ((status != 0)); then
            tool_ok=0
            fail "$tool over $test ($part): exit $status; $log"
          elif [[ -z $inside_nccl ]] &&
               ! grep -qE 'ERROR SUMMARY: 0 errors|RACECHECK SUMMARY: 0 hazards' "$log"; then
            tool_ok=0
            fail "$tool over $test ($part): no clean summary in $log"
          fi
        done
      done
      ((tool_ok)) && sanitized+=("$tool ok") || sanitized+=("$tool FAILED")
    done
  else
    fail "compute-sanitizer not found (PATH, \$CUDA_HOME/bin, /usr/local/cuda); --no-sanitizers skips it"
  fi
fi
((${#sanitized[@]})) && notes+=("$(IFS=,; echo "${sanitized[*]}" | sed 's/,/, /g')")

# The main job on the GPU: crema-cuda-demo makes its databases, trains, and exits 1 below the
# test accuracy it expects.
# Where built with crema::nvjpeg it trains a second time, from JPEG files decoded on the GPUs.
if ((demo && device)) && [[ -x $here/bin/crema-cuda-demo ]]; then
  runs=("")
  "$here/bin/crema-cuda-demo" --help 2>/dev/null | grep -q -- '--input=lmdb|jpeg' &&
    runs+=(--input=jpeg)
  for input in "${runs[@]}"; do
    name=crema-cuda-demo${input:+ $input}
    log=$results/demo${input:+-jpeg}.log
    timeout "$limit" "$here/bin/crema-cuda-demo" ${input:+"$input"} --progress=lines >"$log" 2>&1
    status=$?
    accuracy=$(sed -n 's/^test accuracy: //p' "$log")
    if ((status == 0)); then
      notes+=("demo${input:+ $input}: test accuracy ${accuracy}")
    else
      fail "$name: exit $status, test accuracy ${accuracy:-none}; $log"
    fi
  done
fi

# Benchmarks: medians of five runs, each figure beside its baseline in the same run, the runs of
# every case interleaved at random so that a drift of clocks or link state falls on both sides.
# Each run is reported as it ends (the aggregates come only once every case's last run is done).
benchmarked=0
if ((benchmarks && device)); then
  repetitions=(--benchmark_repetitions="$repetitions_wanted"
               --benchmark_enable_random_interleaving=true)
  ((quick)) && repetitions=(--benchmark_min_time=0.01)
  [[ -n $benchmark_filter ]] && repetitions+=("--benchmark_filter=$benchmark_filter")
  benches=("${chosen_benchmarks[@]}")
  if ((${#benches[@]} == 0)); then
    for program in "$here"/bin/crema-gpu-bench-*; do
      [[ -x $program ]] && benches+=("${program##*/crema-gpu-bench-}")
    done
  fi
  for bench in "${benches[@]}"; do
    log=$results/bench-$bench.log
    timeout "$limit" "$here/bin/crema-gpu-bench-$bench" "${repetitions[@]}" \
      --benchmark_out="$results/bench-$bench.json" --benchmark_out_format=json \
      --crema_ratio_out="$results/bench-$bench-ratios.json" 2>&1 | tee "$log"
    status=${PIPESTATUS[0]}
    if ((status == 0)); then
      benchmarked=$((benchmarked + 1))
    else
      fail "benchmark $bench: exit $status; $log"
    fi
  done
  notes+=("benchmarks ${benchmarked}/${#benches[@]}")
fi

verdict=PASS
((${#failures[@]})) && verdict=FAIL
line="gpu-bundle: ${verdict} · $(IFS='|'; echo "${notes[*]}" | sed 's/|/ · /g')"
[[ -n $gpu ]] && line+=" · ${gpu}"
line+=" · results in ${results}"

json_string() {  # the argument as a JSON string
  local text=${1//\\/\\\\}
  printf '"%s"' "${text//\"/\\\"}"
}
json_list() {  # the arguments as a JSON array of strings
  local first=1 item
  printf '['
  for item in "$@"; do
    ((first)) || printf ', '
    first=0
    json_string "$item"
  done
  printf ']'
}
{
  printf '{"verdict": "%s", "device": %s, ' "$verdict" "$([[ $device == 1 ]] && echo true || echo false)"
  printf '"tests": {"passed": %d, "failed": %d, "skipped": %d}, ' "$passed" "$failed" "$skipped"
  printf '"sanitizers": %s, "benchmarks_run": %d, ' "$(json_list "${sanitized[@]}")" "$benchmarked"
  printf '"failures": %s, "summary": %s}\n' "$(json_list "${failures[@]}")" "$(json_string "$line")"
} >"$results/summary.json"

echo
for failure in "${failures[@]}"; do echo "  failed: $failure"; done
echo "$line"
[[ $verdict == PASS ]]
