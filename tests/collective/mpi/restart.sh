#!/usr/bin/env bash
# The restart path of docs/reducer.md: a job whose rank is killed is ended by mpirun; started
# again from its last checkpoint (parameters and every rank's pipeline position), it ends with the
# parameters of a job that was never stopped, bit for bit. Runs crema-mpi-fault-job's train mode
# (fault_job.cpp) as three jobs of 3 ranks.
#   restart.sh FAULT_JOB
set -uo pipefail
job=$1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
launch() { timeout 120 mpiexec -n 3 --oversubscribe "$job" train 40 "$@"; }

launch "$work/never" >"$work/never.log" 2>&1 || { echo "restart: the plain run failed"; cat "$work/never.log"; exit 1; }
never=$(sed -nE 's/^final ([0-9a-f]+)$/\1/p' "$work/never.log")

started=$SECONDS
launch "$work/run" 23 >"$work/killed.log" 2>&1
code=$?
took=$((SECONDS - started))
if ((code == 0 || code == 124)); then
  echo "restart: the job with a rank killed at step 23 exited $code after ${took} s (expected mpirun to end it)"
  cat "$work/killed.log"
  exit 1
fi
echo "restart: a rank killed at step 23: mpirun ended the job (exit ${code}) in ${took} s"

launch "$work/run" >"$work/resumed.log" 2>&1 || { echo "restart: the resumed run failed"; cat "$work/resumed.log"; exit 1; }
grep -q '^resumed at step 20$' "$work/resumed.log" || { echo "restart: not resumed at step 20"; cat "$work/resumed.log"; exit 1; }
resumed=$(sed -nE 's/^final ([0-9a-f]+)$/\1/p' "$work/resumed.log")
if [[ -z "$never" || "$never" != "$resumed" ]]; then
  echo "restart: resumed from step 20, the parameters differ: ${resumed} where a run never stopped ends with ${never}"
  exit 1
fi
echo "restart: resumed from step 20, the parameters equal a run never stopped, bit for bit (${never})"
