#!/usr/bin/env bash
# run_sh_test.sh RUN_SH: the GPU bundle's run.sh decides as docs/gpu.md says, tested here without
# a GPU: a bundle of stand-in programs (bash scripts that act as the real ones would on a GPU
# machine, steered by STUB_* variables) and a stand-in compute-sanitizer that logs its calls.
set -uo pipefail
run_sh=${1:?usage: run_sh_test.sh RUN_SH}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0

# The stand-ins. A test program prints a doctest summary; STUB_SKIP_NO_DEVICE=<program> makes
# that one report a test skipped for want of a device, STUB_FAIL=<program> makes it fail. Asked to
# list its cases, it has 5, two of them in the suite of errors provoked on purpose where it is
# one of STUB_PROVOKED (crema_cuda_tests unless told).
mkdir -p "$work/bundle/bin" "$work/path" "$work/nccl"
cp "$run_sh" "$work/bundle/run.sh"
cat >"$work/bundle/bin/crema-gpu-info" <<'EOF'
#!/usr/bin/env bash
for argument; do [[ $argument == --json=* ]] && echo '{"device": true}' >"${argument#--json=}"; done
if [[ ${STUB_DEVICE:-1} == 0 ]]; then echo "gpu: none"; exit 3; fi
echo "gpu: Stand-in GPU (compute 9.0), driver 0.0, PCIe gen 5 x16"
EOF
for test in crema_cuda_tests crema_cuda_kernel_tests crema_thrust_cpu_tests; do
  cat >"$work/bundle/bin/$test" <<EOF
#!/usr/bin/env bash
name=$test
EOF
  cat >>"$work/bundle/bin/$test" <<'EOF'
echo "$name $*" >>"$STUB_LOG"
if [[ " $* " == *" --list-test-cases "* ]]; then
  cases=5
  if [[ " $* " == *" --test-suite=cuda errors provoked on purpose "* ]]; then
    cases=0
    [[ " ${STUB_PROVOKED-crema_cuda_tests} " == *" $name "* ]] && cases=2
  fi
  echo "[doctest] listing all test case names"
  echo "[doctest] unskipped test cases passing the current filters: $cases"
  exit 0
fi
failed=0
if [[ ${STUB_SKIP_NO_DEVICE:-} == "$name" ]]; then
  echo "crema-test-skip: no CUDA device (cudaGetDeviceCount failed or found none)"
fi
if [[ ${STUB_ALLOWED_SKIP:-} == "$name" ]]; then
  echo "crema-test-skip: a CUDA device is present; this tests the path without one"
fi
if [[ ${STUB_FAIL:-} == "$name" ]]; then
  failed=1
  echo "fault_test.cu:200: ERROR: CHECK_FALSE( report.hung ) is NOT correct!"
fi
echo "[doctest] test cases: 5 | $((5 - failed)) passed | $failed failed | 0 skipped"
exit "$failed"
EOF
done
for bench in synced_buffer device_batches; do
  cat >"$work/bundle/bin/crema-gpu-bench-$bench" <<'EOF'
#!/usr/bin/env bash
echo "$(basename "$0") $*" >>"$STUB_LOG"
echo "ratio = crema / baseline"
EOF
done
# The stand-in demo: STUB_DEMO_JPEG=1 makes it one built with crema::nvjpeg (its --help offers
# --input=jpeg); STUB_JPEG_ACCURACY is its accuracy when trained that way.
cat >"$work/bundle/bin/crema-cuda-demo" <<'EOF'
#!/usr/bin/env bash
if [[ ${1:-} == --help ]]; then
  [[ ${STUB_DEMO_JPEG:-0} == 1 ]] && echo "  --input=lmdb|jpeg  train from the LMDB or from JPEGs"
  exit 0
fi
echo "crema-cuda-demo $*" >>"$STUB_LOG"
accuracy=${STUB_ACCURACY:-0.950}
[[ " $* " == *" --input=jpeg "* ]] && accuracy=${STUB_JPEG_ACCURACY:-$accuracy}
echo "test accuracy: $accuracy"
[[ $accuracy > 0.900 ]]
EOF
# The stand-in compute-sanitizer. STUB_SANITIZER_FINDS=<tool> makes that tool find something;
# STUB_MEMCHECK_REPORTS lists what memcheck reports over the tests that are not provoked on
# purpose: "nccl" (an API error from inside libnccl's calls, as NCCL's kernel lookup raises),
# "bare-nccl" (the same from a libnccl without symbols, behind a frame of the driver), "crema"
# (an API error from crema's own call, behind a frame of the driver), "memory" (a bad access in
# a kernel).
cat >"$work/path/compute-sanitizer" <<'EOF'
#!/usr/bin/env bash
echo "compute-sanitizer $*" >>"$STUB_LOG"
[[ " $* " == *" --tool ${STUB_SANITIZER_FINDS:-none} "* ]] && exit 86
[[ ${STUB_SANITIZER_SILENT:-0} == 1 ]] && exit 0
if [[ -n ${STUB_MEMCHECK_REPORTS:-} && " $* " == *" --tool memcheck "* &&
      " $* " == *" --report-api-errors explicit "* ]]; then
  errors=0
  for report in $STUB_MEMCHECK_REPORTS; do
    case $report in
      nccl) frames=("ncclInitKernelsForDevice(int, int, unsigned long*) in enqueue.cc:52 [0x6d9d3] in libnccl.so.2") ;;
      bare-nccl) frames=(" [0x4cb045] in libcuda.so.1" " [0x95d0e] in libnccl.so.2") ;;
      crema) frames=(" [0x4cb045] in libcuda.so.1" "crema::cuda::cuda_stream::record() [0x3edfc] in crema_cuda_tests") ;;
    esac
    if [[ $report == memory ]]; then
      echo "========= Invalid __global__ read of size 4 bytes"
      echo "=========     at touch_records(const float *, unsigned long)+0x70"
    else
      echo "========= Program hit cudaErrorNoKernelImageForDevice (error 209) due to \"no kernel" \
        "image is available for execution on the device\" on CUDA API call to cudaFuncGetAttributes."
      echo "=========     Saved host backtrace up to driver entry point at error"
      for frame in "${frames[@]}"; do echo "=========         Host Frame: $frame"; done
      echo "=========         Host Frame: main [0x11c8f] in crema_cuda_tests"
    fi
    echo "========= "
    errors=$((errors + 1))
  done
  echo "========= ERROR SUMMARY: $errors errors"
  exit 86
fi
if [[ " $* " == *" --tool racecheck "* ]]; then
  echo "========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)"
else
  echo "========= ERROR SUMMARY: 0 errors"
fi
exit 0
EOF
chmod +x "$work"/bundle/bin/* "$work/path/compute-sanitizer" "$work/bundle/run.sh"
: >"$work/nccl/libnccl.so.2"

# run_case NAME EXPECTED_STATUS [VAR=VALUE ...] -- [run.sh arguments]: runs run.sh in a clean
# environment; its output and the stand-ins' log are left in $work/NAME.{out,log}.
run_case() {
  local name=$1 expected=$2
  shift 2
  local settings=()
  while (($#)) && [[ $1 != -- ]]; do settings+=("$1"); shift; done
  (($#)) && shift
  rm -rf "$work/results"
  env -i PATH="$work/path:/usr/bin:/bin" HOME="$work" NCCL_HOME="$work/nccl" \
    STUB_LOG="$work/$name.log" "${settings[@]}" \
    bash "$work/bundle/run.sh" --results "$work/results" "$@" >"$work/$name.out" 2>&1
  local status=$?
  touch "$work/$name.log"
  if ((status != expected)); then
    echo "FAIL $name: run.sh exited with $status, expected $expected"
    sed 's/^/    /' "$work/$name.out"
    failures=$((failures + 1))
    return 1
  fi
  echo "ok   $name (exit $status)"
}
expect() {  # expect NAME DESCRIPTION COMMAND...: a check on a case's output or log
  local name=$1 what=$2
  shift 2
  if ! "$@"; then
    echo "FAIL $name: $what"
    failures=$((failures + 1))
  fi
}

run_case all_pass 0
expect all_pass "one summary line that says PASS" grep -q '^gpu-bundle: PASS' "$work/all_pass.out"
expect all_pass "the GPU named in the summary" grep -q 'Stand-in GPU' "$work/all_pass.out"
expect all_pass "every sanitizer over both GPU test programs, the provoked errors apart where a
  program has them: 9 runs" test "$(grep -c '^compute-sanitizer' "$work/all_pass.log")" -eq 9
expect all_pass "no run of the provoked errors' suite where a program has none" \
  bash -c "! grep -q '^compute-sanitizer.*crema_cuda_kernel_tests .*--test-suite=' '$work/all_pass.log'"
expect all_pass "the provoked errors' suite alone, without the API error report" \
  grep -q -- "--report-api-errors no .*crema_cuda_tests --no-version --test-suite=cuda errors provoked on purpose" \
  "$work/all_pass.log"
expect all_pass "everything else with the API error report on" \
  grep -q -- "--report-api-errors explicit .*--test-suite-exclude=cuda errors provoked on purpose" \
  "$work/all_pass.log"
expect all_pass "no sanitizer over the CPU-only tests" \
  bash -c "! grep -q '^compute-sanitizer.*crema_thrust_cpu_tests' '$work/all_pass.log'"
expect all_pass "both benchmarks, with their JSON" \
  test "$(grep -c -- '--benchmark_out=' "$work/all_pass.log")" -eq 2
expect all_pass "summary.json says PASS" grep -q '"verdict": "PASS"' "$work/results/summary.json"
expect all_pass "summary.json is JSON" python3 -c "import json,sys; json.load(open(sys.argv[1]))" \
  "$work/results/summary.json"
expect all_pass "the demo's accuracy in the summary" \
  grep -q '^gpu-bundle: PASS .*demo: test accuracy 0.950' "$work/all_pass.out"

run_case benchmark_cases 0 -- --no-sanitizers --no-demo --benchmarks device_batches \
  --benchmark-filter '^(crema|host)/data_layer/|/jpeg_input/'
expect benchmark_cases "the one benchmark, given the filter" \
  grep -q -- "^crema-gpu-bench-device_batches .*--benchmark_filter=^(crema|host)/data_layer/|/jpeg_input/ " \
  "$work/benchmark_cases.log"
expect benchmark_cases "no other benchmark" \
  bash -c "! grep -q '^crema-gpu-bench-synced_buffer' '$work/benchmark_cases.log'"
expect all_pass "no filter unless asked" bash -c "! grep -q -- '--benchmark_filter' '$work/all_pass.log'"
expect all_pass "five runs a case, each reported as it ends" \
  bash -c "grep -q -- '^crema-gpu-bench-.*--benchmark_repetitions=5 ' '$work/all_pass.log' &&
           ! grep -q -- 'aggregates_only' '$work/all_pass.log'"
run_case three_repetitions 0 -- --no-tests --no-demo --benchmarks device_batches --repetitions 3
expect three_repetitions "three runs a case" \
  grep -q -- "^crema-gpu-bench-device_batches .*--benchmark_repetitions=3 " \
  "$work/three_repetitions.log"
run_case no_repetitions 2 -- --repetitions 0

run_case demo_below_expectation 1 STUB_ACCURACY=0.412
expect demo_below_expectation "the demo named with its accuracy" \
  grep -q 'FAILED: crema-cuda-demo: exit 1, test accuracy 0.412' "$work/demo_below_expectation.out"

run_case demo_from_jpegs 0 STUB_DEMO_JPEG=1 STUB_JPEG_ACCURACY=0.930
expect demo_from_jpegs "the demo trained from the LMDB, then from JPEGs" \
  grep -q -- '^crema-cuda-demo --input=jpeg --progress=lines' "$work/demo_from_jpegs.log"
expect demo_from_jpegs "both accuracies in the summary" \
  grep -q '^gpu-bundle: PASS .*demo: test accuracy 0.950.*demo --input=jpeg: test accuracy 0.930' \
  "$work/demo_from_jpegs.out"
run_case demo_from_jpegs_below 1 STUB_DEMO_JPEG=1 STUB_JPEG_ACCURACY=0.412
expect demo_from_jpegs_below "the JPEG run named with its accuracy" \
  grep -q 'FAILED: crema-cuda-demo --input=jpeg: exit 1, test accuracy 0.412' \
  "$work/demo_from_jpegs_below.out"

run_case skipped_for_want_of_a_device 1 STUB_SKIP_NO_DEVICE=crema_cuda_kernel_tests
expect skipped_for_want_of_a_device "the program named" \
  grep -q 'crema_cuda_kernel_tests: 1 test(s) skipped for want of a device' \
  "$work/skipped_for_want_of_a_device.out"
expect skipped_for_want_of_a_device "the summary says FAIL" \
  grep -q '^gpu-bundle: FAIL' "$work/skipped_for_want_of_a_device.out"

run_case allowed_skip 0 STUB_ALLOWED_SKIP=crema_cuda_tests
expect allowed_skip "the skip counted" grep -q '1 skipped' "$work/allowed_skip.out"

run_case failing_test 1 STUB_FAIL=crema_thrust_cpu_tests
expect failing_test "the program named" grep -q 'FAILED: crema_thrust_cpu_tests' "$work/failing_test.out"
expect failing_test "its log's end printed" \
  grep -q '^run.sh:   | fault_test.cu:200: ERROR: CHECK_FALSE( report.hung )' "$work/failing_test.out"

run_case racecheck_finds 1 STUB_SANITIZER_FINDS=racecheck
expect racecheck_finds "racecheck named as failed, memcheck as ok" \
  grep -q 'memcheck ok, racecheck FAILED, synccheck ok' "$work/racecheck_finds.out"

run_case errors_inside_nccl 0 "STUB_MEMCHECK_REPORTS=nccl bare-nccl nccl"
expect errors_inside_nccl "allowed, and said so with their count" \
  grep -q 'memcheck over crema_cuda_tests (rest): 3 API error(s) NCCL raised and handled' \
  "$work/errors_inside_nccl.out"
expect errors_inside_nccl "memcheck ok" grep -q 'memcheck ok, racecheck ok' \
  "$work/errors_inside_nccl.out"
run_case api_error_of_crema 1 "STUB_MEMCHECK_REPORTS=nccl crema"
expect api_error_of_crema "memcheck failed" grep -q 'FAILED: memcheck over crema_cuda_tests' \
  "$work/api_error_of_crema.out"
run_case bad_access_beside_nccl 1 "STUB_MEMCHECK_REPORTS=nccl memory"
expect bad_access_beside_nccl "memcheck failed" grep -q 'memcheck FAILED' \
  "$work/bad_access_beside_nccl.out"

run_case sanitizer_without_summary 1 STUB_SANITIZER_SILENT=1
expect sanitizer_without_summary "said so" \
  grep -q 'no clean summary' "$work/sanitizer_without_summary.out"

run_case no_device 3 STUB_DEVICE=0
expect no_device "no test run" test ! -s "$work/no_device.log"
# Without a device, skips for want of one are what is expected.
run_case no_device_ok 0 STUB_DEVICE=0 STUB_SKIP_NO_DEVICE=crema_cuda_tests -- --no-device-ok
expect no_device_ok "tests run, no sanitizer, no benchmark" \
  bash -c "grep -q '^crema_cuda_tests' '$work/no_device_ok.log' &&
           ! grep -q -e '^compute-sanitizer' -e '^crema-gpu-bench' -e '^crema-cuda-demo' \
             '$work/no_device_ok.log'"

rm "$work/path/compute-sanitizer"
if [[ -e /usr/local/cuda/bin/compute-sanitizer ||
      -e /usr/local/cuda/compute-sanitizer/compute-sanitizer ]]; then
  echo "skip sanitizer_missing (this machine has a compute-sanitizer where run.sh looks)"
else
  run_case sanitizer_missing 1 CUDA_HOME="$work/no-cuda" -- --no-benchmarks
  expect sanitizer_missing "said so" grep -q 'compute-sanitizer not found' \
    "$work/sanitizer_missing.out"
fi
run_case sanitizer_skipped 0 -- --no-sanitizers --no-benchmarks
run_case tests_skipped 0 -- --no-tests --benchmarks synced_buffer
expect tests_skipped "no test, no sanitizer; the demo and the benchmark run" \
  bash -c "! grep -q -e '^crema_' -e '^compute-sanitizer' '$work/tests_skipped.log' &&
           grep -q '^crema-gpu-bench-synced_buffer' '$work/tests_skipped.log' &&
           grep -q '^crema-cuda-demo' '$work/tests_skipped.log'"
expect tests_skipped "the summary says so" grep -q 'tests not run' "$work/tests_skipped.out"

run_case bad_usage 2 -- --frobnicate

if ((failures)); then
  echo "run_sh_test: $failures check(s) failed"
  exit 1
fi
echo "run_sh_test: run.sh decides as documented"
