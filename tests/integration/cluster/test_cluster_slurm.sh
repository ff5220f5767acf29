#!/bin/bash
# Slurm on namespaced hosts (suite 'multinode'): `tools/cluster run --slurm --hosts 3`,
# then inside host 0: srun -N 3 -n 6 hostname, sbatch --wait, salloc + mpirun.
# Skips (77) when not root or when slurm-wlm/munge are not installed (tools/deps).
#   usage: test_cluster_slurm.sh /abs/path/to/tools/cluster
set -u
CLUSTER=${1:?usage: test_cluster_slurm.sh PATH/TO/tools/cluster}
fail() { echo "FAIL: $*" >&2; exit 1; }

if [ "${2:-}" = "--check" ]; then
  read -r -a H <<<"$CHORUS_CLUSTER_HOSTS"
  h0() { "$CLUSTER" exec --name "$CHORUS_CLUSTER_NAME" "${H[0]}" -- "$@"; }
  want=$(printf '%s\n' "${H[@]}" "${H[@]}" | sort)
  got=$(h0 timeout 60 srun -N 3 -n 6 hostname | sort) || fail "srun -N 3 -n 6 hostname failed"
  [ "$got" = "$want" ] || fail "srun -N 3 -n 6 hostname printed '$got'"
  echo "ok: srun -N 3 -n 6 hostname"

  tmp=$(mktemp -d /tmp/chorus-slurm-test.XXXXXX)
  trap 'rm -rf "$tmp"' EXIT
  printf '#!/bin/sh\nsrun hostname | sort > %s/out\n' "$tmp" > "$tmp/job.sh"
  h0 timeout 60 sbatch --wait -N 3 -n 3 -o "$tmp/slurm.out" "$tmp/job.sh" >/dev/null ||
    fail "sbatch --wait failed: $(cat "$tmp/slurm.out" 2>/dev/null)"
  [ "$(cat "$tmp/out")" = "$(printf '%s\n' "${H[@]}" | sort)" ] || fail "sbatch job output '$(cat "$tmp/out")'"
  echo "ok: sbatch --wait"

  if command -v mpirun >/dev/null; then
    got=$(h0 timeout 90 salloc -N 3 -n 6 mpirun --allow-run-as-root hostname 2>/dev/null | sort) ||
      fail "salloc -N 3 -n 6 mpirun hostname failed"
    [ "$got" = "$want" ] || fail "salloc + mpirun printed '$got'"
    echo "ok: salloc -N 3 -n 6 mpirun --allow-run-as-root hostname"
  fi
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "SKIP: the multinode tests need root (network namespaces, mounts); running as uid $(id -u)" >&2
  exit 77
fi
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null; then
  echo "SKIP: slurm-wlm and munge are not installed (tools/deps installs them)" >&2
  exit 77
fi
name="cs$$"
"$CLUSTER" run --name "$name" --hosts 3 --slurm -- bash "$0" "$CLUSTER" --check; rc=$?
[ "$rc" -eq 0 ] || fail "Slurm checks failed (rc $rc)"
if ip netns list | awk '{print $1}' | grep -qE "^$name-"; then fail "namespaces of $name left behind"; fi
echo PASS
