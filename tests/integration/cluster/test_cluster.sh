#!/bin/bash
# Smoke test of tools/cluster (suite 'multinode'): brings up a 2-host namespaced
# cluster and checks per-host hostname, boot id, /dev/shm and SysV IPC, name
# resolution + ping between hosts, the ssh-like agent (exit code, stdin, options,
# use from inside a host), and that nothing of the cluster is left afterwards.
#   usage: test_cluster.sh /abs/path/to/tools/cluster
set -u
CLUSTER=${1:?usage: test_cluster.sh PATH/TO/tools/cluster}

fail() { echo "FAIL: $*" >&2; exit 1; }

if [ "${2:-}" = "--check" ]; then
  # ---- runs inside `tools/cluster run`, in the root namespace.
  set -o pipefail
  read -r -a H <<<"$CHORUS_CLUSTER_HOSTS"
  [ "${#H[@]}" -eq 2 ] || fail "expected 2 hosts, got '$CHORUS_CLUSTER_HOSTS'"
  ex() { "$CLUSTER" exec --name "$CHORUS_CLUSTER_NAME" "$@"; }
  root_boot=$(cat /proc/sys/kernel/random/boot_id)
  declare -A seen=()
  for h in "${H[@]}"; do
    got=$(ex "$h" -- hostname) || fail "exec hostname in $h failed"
    [ "$got" = "$h" ] || fail "hostname in $h is '$got'"
    b=$(ex "$h" -- cat /proc/sys/kernel/random/boot_id) || fail "reading boot_id in $h"
    [ "$b" != "$root_boot" ] || fail "$h shares the root namespace's boot_id"
    [ -z "${seen[$b]:-}" ] || fail "$h and ${seen[$b]} share boot_id $b"
    seen[$b]=$h
    echo "ok: $h hostname and boot_id $b"
  done
  # Index form of the host.
  [ "$(ex 1 -- hostname)" = "${H[1]}" ] || fail "exec by index 1 did not reach ${H[1]}"

  f="chorus-cluster-test-$$"
  ex "${H[0]}" -- sh -c "echo x > /dev/shm/$f" || fail "creating /dev/shm/$f in ${H[0]}"
  ex "${H[0]}" -- test -e "/dev/shm/$f" || fail "/dev/shm/$f vanished between two execs into ${H[0]}"
  ex "${H[1]}" -- test ! -e "/dev/shm/$f" || fail "/dev/shm/$f of ${H[0]} is visible in ${H[1]}"
  [ ! -e "/dev/shm/$f" ] || fail "/dev/shm/$f of ${H[0]} is visible in the root namespace"
  echo "ok: /dev/shm is private per host"

  if command -v ipcmk >/dev/null; then
    ex "${H[0]}" -- ipcmk -M 4096 -p 600 >/dev/null 2>&1 || fail "ipcmk in ${H[0]}"
    # ipcmk picks a random key; look the segment up by listing instead.
    seg=$(ex "${H[0]}" -- ipcs -m | awk 'NR>3 && $1 ~ /^0x/ {print $1; exit}')
    [ -n "$seg" ] || fail "SysV segment made by ipcmk not listed in ${H[0]}"
    ex "${H[1]}" -- ipcs -m | grep -q "^$seg " && fail "SysV segment $seg of ${H[0]} is listed in ${H[1]}"
    ipcs -m | grep -q "^$seg " && fail "SysV segment $seg of ${H[0]} is listed in the root namespace"
    echo "ok: SysV IPC is private per host"
  fi

  command -v ping >/dev/null || fail "ping not installed (apt-get install iputils-ping, or tools/deps)"
  ex "${H[0]}" -- ping -c 1 -W 5 "${H[1]}" >/dev/null || fail "${H[0]} cannot ping ${H[1]} by name"
  ex "${H[1]}" -- ping -c 1 -W 5 "${H[0]}" >/dev/null || fail "${H[1]} cannot ping ${H[0]} by name"
  echo "ok: hosts ping each other by name"

  # The agent: ssh semantics.
  # shellcheck disable=SC2086
  agent() { $CHORUS_CLUSTER_AGENT "$@"; }
  agent "${H[1]}" 'exit 7'; rc=$?
  [ "$rc" -eq 7 ] || fail "agent returned $rc, expected the remote exit code 7"
  out=$(agent -x -o BatchMode=yes "root@${H[1]}" 'echo $(hostname) "$PWD"') || fail "agent with ssh options failed"
  [ "$out" = "${H[1]} $PWD" ] || fail "agent output '$out', expected '${H[1]} $PWD'"
  out=$(echo piped | agent "${H[1]}" cat) || fail "agent stdin"
  [ "$out" = piped ] || fail "agent did not pass stdin through (got '$out')"
  out=$(agent "${H[1]}" 'echo to-stderr >&2' 2>&1 >/dev/null)
  [ "$out" = to-stderr ] || fail "agent did not pass stderr through (got '$out')"
  out=$(ex "${H[0]}" -- $CHORUS_CLUSTER_AGENT "${H[1]}" 'hostname; exit 5'); rc=$?
  [ "$rc" -eq 5 ] && [ "$out" = "${H[1]}" ] ||
    fail "agent from inside ${H[0]}: rc $rc output '$out' (expected 5, ${H[1]})"
  if [ -x "$(dirname "$CLUSTER")/cluster-agent" ]; then
    "$(dirname "$CLUSTER")/cluster-agent" "${H[0]}" 'exit 9'; rc=$?
    [ "$rc" -eq 9 ] || fail "tools/cluster-agent returned $rc, expected 9"
  fi
  echo "ok: agent passes exit code, stdin, stdout, stderr; works from inside a host"
  exit 0
fi

# ---- outer part
if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: the multinode tests need root (network namespaces, mounts); running as uid $(id -u)" >&2
  exit 77
fi
for t in ip unshare nsenter; do
  command -v "$t" >/dev/null || fail "'$t' not installed (iproute2 / util-linux; see tools/deps)"
done
name="ct$$"
state="${CHORUS_CLUSTER_STATE_ROOT:-/tmp}/chorus-cluster-$name"
left_behind() {
  ip netns list | awk '{print $1}' | grep -E "^$name-(sw|h[0-9]+)$"
  [ -e "$state" ] && echo "$state"
}

"$CLUSTER" run --name "$name" --hosts 2 -- bash "$0" "$CLUSTER" --check; rc=$?
[ "$rc" -eq 0 ] || fail "checks inside the cluster failed (rc $rc)"
[ -z "$(left_behind)" ] || fail "left behind after run: $(left_behind | tr '\n' ' ')"
echo "ok: nothing of cluster $name left after run"

# run returns the command's exit code and tears down also when it fails.
"$CLUSTER" -q run --name "$name" -- sh -c 'exit 3'; rc=$?
[ "$rc" -eq 3 ] || fail "run returned $rc for a command exiting 3"
[ -z "$(left_behind)" ] || fail "left behind after a failing command: $(left_behind | tr '\n' ' ')"
echo "ok: run passes the exit code and tears down after a failure"
echo PASS
