#!/usr/bin/env bash
# A rank killed (SIGKILL) or stopped (SIGSTOP: alive, silent) in the middle of each MPI operation
# crema has, in jobs of 3 ranks. Runs crema-mpi-fault-job (fault_job.cpp) once per case and reads
# the line each rank prints. No rank may deliver a wrong sum or give up late, and the parameter
# server must go on without a dead client. A stopped rank must be named by both others. A killed
# one need not be: Open MPI's TCP transport may wedge a rank that was sending to it ("Your Open
# MPI job may now hang or fail", it says: one MPI_Test that never returns), and then the third
# names the wedged one, which is the rank that stopped answering it; or mpirun ends the job. A
# survivor that gives no answer must be shown wedged: the job's watch says so when one MPI call
# has held a rank for 5 s ("rank R: stuck inside MPI_Test ..."); a survivor silent outside MPI
# fails the test. The lines are printed either way. (A survivor killed by SIGPIPE for writing to
# the dead rank's connection was a crema bug: crema's MPI components ignore SIGPIPE now.)
#   killed_rank.sh FAULT_JOB [OPERATION...]   (default: every one; ps is the parameter server's)
set -uo pipefail
job=$1
shift
operations=("$@")
((${#operations[@]} == 0)) && operations=(broadcast reduce allreduce p2p_sync ps)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0

# run OPERATION VICTIM HOW: one job; prints what each rank said; sets failed on a bad outcome.
run() {
  local operation=$1 victim=$2 how=$3
  local log="$work/$operation-$victim-$how.log"
  # Recovery on: mpirun leaves the others running when a rank dies, so that they show what they
  # do about it (without it, mpirun ends the job at once: also no hang and no wrong sum). TCP
  # between the ranks, as between machines: Open MPI's shared-memory transport can wedge a rank
  # that was copying from a peer killed mid-message (docs/reducer.md).
  mpiexec -n 3 --oversubscribe --mca orte_enable_recovery 1 --mca btl tcp,self \
    "$job" "$operation" "$victim" "$how" >"$log" 2>&1 &
  local launcher=$!
  local started=$SECONDS said=0 stuck=0 ended=0 first_answer=
  while ((SECONDS - started < 40)); do
    said=$(grep -cE '^rank [0-9]+: (named|finished|WRONG|blamed)' "$log")
    stuck=$(grep -cE '^rank [0-9]+: stuck inside MPI' "$log")
    ((said + stuck >= 2)) && break
    if ! kill -0 "$launcher" 2>/dev/null; then
      ended=1
      break
    fi
    # A killed rank may wedge a survivor inside MPI: once one has answered, the other has 10 s.
    if [[ "$how" == kill ]] && ((said >= 1)); then
      first_answer=${first_answer:-$SECONDS}
      ((SECONDS - first_answer >= 10)) && break
    fi
    sleep 0.2
  done
  local took=$((SECONDS - started))
  # End the job: the victim first (SIGKILL ends a stopped process too; resumed first, a stopped
  # server could run long enough to find its clients gone and say so), then everything.
  local pid
  pid=$(sed -nE 's/^rank [0-9]+: pid ([0-9]+) fails.*/\1/p' "$log" | head -1)
  if [[ -n "$pid" ]]; then kill -KILL "$pid" 2>/dev/null; kill -CONT "$pid" 2>/dev/null; fi
  kill -TERM "$launcher" 2>/dev/null
  # mpirun ends within tens of milliseconds of SIGTERM; it gets half a second before SIGKILL.
  for _ in {1..10}; do
    kill -0 "$launcher" 2>/dev/null || break
    sleep 0.05
  done
  kill -KILL "$launcher" 2>/dev/null
  pkill -KILL -f "$job $operation $victim $how" 2>/dev/null
  wait "$launcher" 2>/dev/null
  local outcome named
  named=$(grep -cE '^rank [0-9]+: (named rank|finished)' "$log")
  if grep -q 'WRONG' "$log"; then
    outcome="FAILED (a rank said WRONG)"
    failed=1
  elif grep -q '^rank [0-9]*: blamed the server' "$log" &&
    ! grep -q '^rank 0: stuck inside MPI' "$log"; then
    outcome="FAILED (a client gave up on a server that was not wedged inside MPI)"
    failed=1
  elif ((named >= 2)); then
    outcome="ok: both other ranks ended as they should, in ${took} s"
  elif [[ "$how" == kill ]] && ((took < 40)) && ((said + stuck >= 2)); then
    outcome="ok: ${said} of the others answered in ${took} s, ${named} naming rank ${victim}; Open MPI wedged ${stuck} inside a call"
  elif [[ "$how" == kill ]] && ((took < 40)) && ((ended)); then
    outcome="ok: ${said} of the others answered in ${took} s, ${named} naming rank ${victim}; mpirun ended the job"
  else
    outcome="FAILED (${named} of 2 ranks named rank ${victim} in ${took} s)"
    failed=1
  fi
  local done_to=killed
  [[ "$how" == stop ]] && done_to=stopped
  echo "$operation, rank $victim $done_to: $outcome"
  grep -E '^rank [0-9]+: (named|finished|WRONG|blamed|stuck)' "$log" | sed 's/^/    /'
  if [[ "$outcome" == FAILED* ]]; then sed 's/^/    | /' "$log" | tail -30; fi
}

for operation in "${operations[@]}"; do
  for how in stop kill; do
    if [[ "$operation" == ps ]]; then
      run ps_pull 2 "$how"
      run ps_push 1 "$how"
      run ps_server 0 "$how"
    else
      for victim in 0 2; do run "$operation" "$victim" "$how"; done
    fi
  done
done
exit "$failed"
