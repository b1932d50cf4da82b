#!/usr/bin/env bash
# The GPU bundle's MPI launcher on a machine without MPI: packs the launcher
# with the CPU binary (bin/gnn-spmd, from `make build`) into a scratch
# bundle (scripts/gpu-bundle.sh --mpi-only), then, in a mount namespace
# where the system's Open MPI, PMIx, libevent and hwloc files are covered
# (empty tmpfs over their directories, /dev/null over their files), runs
# `bundle/bin/mpirun -np 2 gnn-spmd train` on a small generated graph and
# checks it ends with exit 0, its summary line and two ranks' epochs. Then
# the same with the bundle's MPI plugins removed, and with its libmpi
# removed: both must fail, or the bundle was not what ran. Needs root (for
# unshare -m) and Debian's packages (dpkg -L lists what to cover).
#
#   make test-gpu-bundle      (or scripts/test-gpu-bundle.sh after make build)
set -euo pipefail
cd "$(dirname "$0")/.."
fail() { echo "test-gpu-bundle: FAIL: $*" >&2; exit 1; }
[ -x bin/gnn-spmd ] || fail "bin/gnn-spmd missing: run make build"
[ "$(id -u)" = 0 ] || fail "needs root for unshare -m"
command -v unshare >/dev/null && command -v dpkg >/dev/null || fail "needs unshare (util-linux) and dpkg"

s=$(mktemp -d /tmp/test-gpu-bundle.XXXXXX)
trap 'rm -rf "$s"' EXIT
scripts/gpu-bundle.sh --mpi-only "$s/bundle" bin/gnn-spmd
bin/gnn-spmd gen --out "$s/g.h5" --nodes 2000 --features 16 --degree 8 --seed 1 >/dev/null

# What to cover: the files of the MPI packages and of the libraries the
# launcher loads, as Debian installed them.
pkgs=(libopenmpi3 openmpi-bin openmpi-common libpmix2 libevent-core-2.1-7 libevent-pthreads-2.1-7 libhwloc15)
dirs=(/usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi /etc/openmpi)
files=()
while read -r f; do
  case $f in /usr/share/doc/*|/usr/share/man/*|/usr/share/lintian/*) continue ;; esac
  for d in "${dirs[@]}"; do case $f in "$d"/*) continue 2 ;; esac; done
  [ -f "$f" ] && [ ! -L "$f" ] && files+=("$f")
done < <(dpkg -L "${pkgs[@]}" 2>/dev/null | sort -u)
[ ${#files[@]} -gt 20 ] || fail "dpkg -L ${pkgs[*]} listed ${#files[@]} files: are Debian's Open MPI packages installed?"
printf '%s\n' "${dirs[@]}" >"$s/dirs"
printf '%s\n' "${files[@]}" >"$s/files"

# hidden COMMAND...: runs it with the system's MPI covered; first checks
# that the cover holds (the system's orterun and libmpi cannot be run or
# loaded).
hidden() {
  unshare -m --propagation private bash -euo pipefail -c '
    s=$1; shift
    while read -r d; do [ -d "$d" ] && mount -t tmpfs -o ro,size=1k none "$d"; done <"$s/dirs"
    while read -r f; do mount --bind /dev/null "$f"; done <"$s/files"
    if /usr/bin/orterun --version >/dev/null 2>&1; then echo "the system orterun still runs" >&2; exit 90; fi
    if [ -s /usr/lib/x86_64-linux-gnu/libmpi.so.40 ]; then echo "the system libmpi is still readable" >&2; exit 90; fi
    exec "$@"' hidden "$s" "$@"
}

# run BUNDLE LOG: the bundled mpirun, two ranks of the bundled gnn-spmd.
run() {
  local b=$1 log=$2
  hidden timeout -k 5 120 "$b/bin/mpirun" -np 2 "$b/bin/gnn-spmd" train --data "$s/g.h5" --device cpu \
    --epochs 3 --hidden 16 --metrics "$s/m.jsonl" >"$log" 2>&1
}

echo "== the bundle's mpirun -np 2 with the system's MPI covered"
rm -f "$s/m.jsonl"
if ! run "$s/bundle" "$s/ok.log"; then cat "$s/ok.log"; fail "mpirun -np 2 from the bundle did not end with exit 0"; fi
cat "$s/ok.log"
grep -q '^ranks 2,' "$s/ok.log" || fail "no 'ranks 2' header: the two processes did not form one job"
grep -q '^done: ' "$s/ok.log" || fail "no summary line"
[ "$(grep -c '"epoch"' "$s/m.jsonl")" = 3 ] || fail "the metrics file does not hold 3 epochs"

# The bundle without its MPI parts: the same run must fail, or what ran
# came from somewhere else.
echo "== the same without the bundle's MPI plugins (must fail)"
cp -a "$s/bundle" "$s/noplug"
rm -f "$s/noplug/mpi/lib/openmpi/"*.so
if run "$s/noplug" "$s/noplug.log"; then cat "$s/noplug.log"; fail "ran without the bundle's plugins"; fi
tail -n 3 "$s/noplug.log"
echo "== the same without the bundle's libmpi (must fail)"
cp -a "$s/bundle" "$s/nolib"
rm -f "$s/nolib/lib/libmpi.so.40"
if run "$s/nolib" "$s/nolib.log"; then cat "$s/nolib.log"; fail "ran without the bundle's libmpi"; fi
tail -n 3 "$s/nolib.log"
echo "test-gpu-bundle: PASS (the bundle's mpirun ran 2 ranks with the system's MPI covered; without its plugins or its libmpi it failed)"
