#!/usr/bin/env bash
# Packs what scripts/gpu-check.sh runs on a GPU machine that has a CUDA
# driver but no Go, MPI or HDF5: the GPU binary, gnn-results (compare), the
# GPU test binaries, Open MPI's launcher with its plugins (bin/mpirun), and
# every shared library ldd says they load, except the C runtime and libcuda,
# which must come from the machine (libcuda belongs to its driver). cuBLAS
# and NCCL are loaded with dlopen, so ldd does not list them: the binaries
# find them on the machine (the CUDA toolkit, LD_LIBRARY_PATH, a Python
# environment's NVIDIA wheels; "gnn-spmd devices" says where). Output:
# bin/gpu-bundle/{bin,lib,mpi} plus the check script and the PyG
# comparison (gpu-pyg.sh, pyg_gpu.py, pyg_minibatch.py).
#
#   make gpu-bundle            (or scripts/gpu-bundle.sh; both build first)
#   scripts/gpu-bundle.sh --mpi-only DIR [PROGRAM...]
#       only the MPI launcher, and the given programs with their libraries,
#       in DIR (no CUDA build): what `make test-gpu-bundle` checks.
#
# The launcher: DIR/bin/mpirun is a wrapper that points Open MPI (OPAL_*)
# and PMIx (PMIX_*) at their files under DIR/mpi, puts DIR/lib first on
# LD_LIBRARY_PATH and DIR/mpi/bin (orted) first on PATH, and sets the
# defaults a root container needs, then runs the real orterun.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=$PATH:/usr/local/go/bin

die() { echo "gpu-bundle: $*" >&2; exit 1; }

# copy_libs LIBDIR FILE...: the libraries ldd lists for the files, but
# the C runtime and libcuda; a library ldd cannot find stops the bundle.
copy_libs() {
  local dest=$1; shift
  local f missing
  for f in "$@"; do
    # libcuda comes from the GPU machine's driver: a build machine may lack it.
    missing=$({ ldd "$f" 2>/dev/null || true; } | awk '/not found/ && $1 !~ /^libcuda\.so/ {print $1}')
    [ -z "$missing" ] || die "$f needs $(echo $missing), which this machine lacks"
  done
  for f in "$@"; do
    { ldd "$f" 2>/dev/null || true; } | awk '/=> \//{print $3}'
  done | sort -u | while read -r lib; do
    case $(basename "$lib") in
      libc.so.*|libm.so.*|libpthread.so.*|libdl.so.*|librt.so.*|ld-linux*|libcuda.so*) ;;
      *) cp -L "$lib" "$dest/" ;;
    esac
  done
}

# ompi_path NAME: a compiled-in directory of the Open MPI the binaries
# link (ompi_info --path all: "Pkglibdir: /usr/lib/...").
ompi_path() {
  ompi_info --path all | awk -v k="$1:" '$1 == k {print $2; exit}'
}

# pack_mpi DIR: Open MPI's launcher, daemon, plugins, help texts and
# default parameters under DIR/mpi, their libraries in DIR/lib, and the
# wrapper DIR/bin/mpirun.
pack_mpi() {
  local dir=$1 m=$1/mpi
  command -v orterun >/dev/null && command -v orted >/dev/null && command -v ompi_info >/dev/null ||
    die "Open MPI's orterun, orted or ompi_info is not on PATH (Debian: apt-get install openmpi-bin)"
  local pkglib pkgdata sysconf
  pkglib=$(ompi_path Pkglibdir) pkgdata=$(ompi_path Pkgdatadir) sysconf=$(ompi_path Sysconfdir)
  [ -d "$pkglib" ] && ls "$pkglib"/mca_*.so >/dev/null 2>&1 || die "no Open MPI plugins (mca_*.so) in '$pkglib'"
  [ -f "$pkgdata/help-mpi-runtime.txt" ] || die "no Open MPI help texts in '$pkgdata' (Debian: openmpi-common)"
  mkdir -p "$dir/bin" "$dir/lib" "$m/bin" "$m/lib/openmpi" "$m/share/openmpi" "$m/etc"
  cp -L "$(command -v orterun)" "$(command -v orted)" "$(command -v ompi_info)" "$m/bin/"
  cp -L "$pkglib"/*.so "$m/lib/openmpi/"
  cp -rL "$pkgdata"/. "$m/share/openmpi/"
  # The system's defaults (Debian's turn off the InfiniBand and UCX
  # transports), with the hostfile they name.
  [ -f "$sysconf/openmpi-mca-params.conf" ] && cp "$sysconf/openmpi-mca-params.conf" "$m/etc/"
  [ -f "$sysconf/openmpi-default-hostfile" ] && cp "$sysconf/openmpi-default-hostfile" "$m/etc/"
  # Debian's Open MPI uses the system's PMIx (libpmix.so.2), which loads
  # plugins of its own from <pmix prefix>/lib/pmix.
  local pmixlib pmixplug=""
  pmixlib=$(ldd "$pkglib"/mca_pmix_*.so 2>/dev/null | awk '/libpmix\.so/ && /=> \//{print $3; exit}' || true)
  if [ -n "$pmixlib" ]; then
    local d
    for d in "$(dirname "$pmixlib")"/pmix2/lib/pmix "$(dirname "$pmixlib")"/pmix; do
      if ls "$d"/pmix_mca_*.so >/dev/null 2>&1; then pmixplug=$d; break; fi
    done
    [ -n "$pmixplug" ] || die "Open MPI loads $pmixlib but its plugins (pmix_mca_*.so) were not found beside it"
    mkdir -p "$m/pmix/lib/pmix" "$m/pmix/share"
    cp -L "$pmixplug"/*.so "$m/pmix/lib/pmix/"
    [ -d "$pmixplug/../../share/pmix" ] && cp -rL "$pmixplug/../../share/pmix" "$m/pmix/share/"
  fi
  copy_libs "$dir/lib" "$m"/bin/* "$m"/lib/openmpi/*.so $([ -n "$pmixplug" ] && echo "$m"/pmix/lib/pmix/*.so)
  cat >"$dir/bin/mpirun" <<'WRAP'
#!/usr/bin/env bash
# Open MPI's mpirun from this bundle, on a machine without MPI: every
# directory Open MPI and PMIx compiled in is pointed at the bundle, so that
# the launcher, the ranks it starts (which inherit this environment) and
# orted find their plugins, help texts and libraries here. A variable set
# before this runs wins; flags given to it win over these defaults.
set -euo pipefail
b=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
m=$b/mpi
export OPAL_PREFIX=$m OPAL_EXEC_PREFIX=$m OPAL_BINDIR=$m/bin OPAL_LIBDIR=$b/lib
export OPAL_PKGLIBDIR=$m/lib/openmpi OPAL_DATAROOTDIR=$m/share OPAL_DATADIR=$m/share
export OPAL_PKGDATADIR=$m/share/openmpi OPAL_SYSCONFDIR=$m/etc
if [ -d "$m/pmix" ]; then
  export PMIX_PREFIX=$m/pmix PMIX_EXEC_PREFIX=$m/pmix PMIX_LIBDIR=$m/pmix/lib
  export PMIX_PKGLIBDIR=$m/pmix/lib/pmix PMIX_DATADIR=$m/pmix/share PMIX_PKGDATADIR=$m/pmix/share/pmix
  export PMIX_SYSCONFDIR=$m/pmix/share PMIX_MCA_mca_base_component_path=$m/pmix/lib/pmix
fi
export PATH=$m/bin:$b/bin:$PATH
export LD_LIBRARY_PATH=$b/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# GPU machines are often containers run as root, with fewer cores than
# ranks sharing a GPU: allow root, oversubscribe, no binding (ranks on one
# GPU would share a core), and shared memory without the ptrace-based
# single copy that containers refuse.
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export OMPI_MCA_rmaps_base_oversubscribe=${OMPI_MCA_rmaps_base_oversubscribe:-1}
export OMPI_MCA_hwloc_base_binding_policy=${OMPI_MCA_hwloc_base_binding_policy:-none}
export OMPI_MCA_btl=${OMPI_MCA_btl:-self,vader,tcp}
export OMPI_MCA_btl_vader_single_copy_mechanism=${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
exec "$m/bin/orterun" "$@"
WRAP
  chmod +x "$dir/bin/mpirun"
}

if [ "${1:-}" = --mpi-only ]; then
  [ $# -ge 2 ] || die "usage: scripts/gpu-bundle.sh --mpi-only DIR [PROGRAM...]"
  dir=$2; shift 2
  mkdir -p "$dir/bin" "$dir/lib"
  pack_mpi "$dir"
  for p in "$@"; do
    [ -x "$p" ] || die "$p: no such program"
    cp "$p" "$dir/bin/"
  done
  [ $# -eq 0 ] || copy_libs "$dir/lib" "$@"
  echo "gpu-bundle: the MPI launcher$([ $# -eq 0 ] || echo " and $*") in $dir ($(du -sh "$dir" | cut -f1))"
  exit 0
fi

out=bin/gpu-bundle
tags=${CUDA_TAGS:-}
# The GPU binary from the tree as it is (PTX first): a bin/gnn-spmd-cuda
# left from an earlier build must not travel.
make -s cuda
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
cp bin/gnn-spmd-cuda "$out/bin/gnn-spmd"
go build -tags "$tags" -o "$out/bin/gnn-results" ./cmd/gnn-results
go test -tags "$tags" -c -o "$out/bin/kernels-cuda.test" ./kernels/cuda
go test -tags "$tags" -c -o "$out/bin/halo-gpu.test" ./comm/halo/gpu
go test -tags "$tags" -c -o "$out/bin/comm.test" ./comm
go test -tags "$tags" -c -o "$out/bin/job.test" ./gnn/job
cp scripts/gpu-check.sh scripts/gpu-pyg.sh bench/reference/pyg_gpu.py bench/reference/pyg_minibatch.py "$out/"
copy_libs "$out/lib" "$out"/bin/*
pack_mpi "$out"
echo "gpu-bundle: $(du -sh "$out" | cut -f1) in $out ($(ls "$out/lib" | wc -l) libraries)"
# One compressed file for machines reached through a size-limited copy.
tar -C bin -cJf bin/gpu-bundle.tar.xz gpu-bundle
echo "gpu-bundle: bin/gpu-bundle.tar.xz $(du -h bin/gpu-bundle.tar.xz | cut -f1)"
