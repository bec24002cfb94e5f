#!/usr/bin/env bash
# Two machines, for real: two network namespaces on this machine joined by a veth pair, and a job
# of 2 x 2 ranks whose traffic between the "hosts" is TCP over that link. mpirun runs in the
# first namespace; Open MPI's launch agent starts the daemon of the second by entering its
# namespace instead of calling ssh. Skips itself where namespaces cannot be made (not root, no
# iproute2, a container without the capability).
#   two_hosts.sh <the MPI test program> [its arguments]
set -uo pipefail
program=$1
shift

if ! command -v ip >/dev/null || [[ $(id -u) -ne 0 ]]; then
  echo "crema-test-skip: network namespaces need root and iproute2's ip"
  exit 0
fi
id=$(( $$ % 200 + 20 ))  # one subnet and one pair of names per run
a=crema-host-a-$$
b=crema-host-b-$$
address_a=10.77.$id.1
address_b=10.77.$id.2
work=$(mktemp -d)
cleanup() {
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null  # the veth pair goes with its namespaces
  rm -rf "$work"
}
trap cleanup EXIT

if ! { ip netns add "$a" && ip netns add "$b" &&
       ip link add "ca$$" type veth peer name "cb$$" &&
       ip link set "ca$$" netns "$a" && ip link set "cb$$" netns "$b" &&
       ip -n "$a" addr add "$address_a/24" dev "ca$$" && ip -n "$b" addr add "$address_b/24" dev "cb$$" &&
       ip -n "$a" link set "ca$$" up && ip -n "$b" link set "cb$$" up &&
       ip -n "$a" link set lo up && ip -n "$b" link set lo up; } 2>"$work/ip.log"; then
  echo "crema-test-skip: cannot make network namespaces here: $(head -1 "$work/ip.log")"
  exit 0
fi

cat >"$work/agent.sh" <<AGENT
#!/bin/sh
# Open MPI's launch agent for these two "hosts": enter the host's namespace, run the command.
host=\$1
shift
case "\$host" in
  $address_a) ns=$a ;;
  $address_b) ns=$b ;;
  *) echo "netns agent: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" /bin/sh -c "\$*"
AGENT
chmod +x "$work/agent.sh"
printf '%s slots=2\n%s slots=2\n' "$address_a" "$address_b" >"$work/hosts"

forward=()
for variable in ASAN_OPTIONS LSAN_OPTIONS TSAN_OPTIONS UBSAN_OPTIONS; do
  [[ -n ${!variable:-} ]] && forward+=(-x "$variable")
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "two hosts: $a ($address_a) and $b ($address_b), 2 ranks each, TCP between them"
ip netns exec "$a" mpirun --hostfile "$work/hosts" -np 4 --map-by slot \
  --mca plm_rsh_agent "$work/agent.sh" --mca btl self,tcp \
  --mca btl_tcp_if_include "10.77.$id.0/24" --mca oob_tcp_if_include "10.77.$id.0/24" \
  "${forward[@]}" "$program" "$@"
