#!/usr/bin/env bash
# Installs what gnn-spmd needs on Debian 12: the C libraries (HDF5, OpenBLAS,
# Open MPI, METIS, PT-Scotch), h5dump, MPICH beside Open MPI (the -tags mpich build),
# Slurm and munge (the single-node test cluster, scripts/slurm-local.sh),
# iproute2 and util-linux (the multi-host test's namespaces), and Go (from the Go module proxy's toolchain
# archive) when no go >= 1.26 is on PATH. Idempotent; needs root or sudo.
set -euo pipefail

GO_VERSION=1.26.8
PKGS=(build-essential pkgconf libhdf5-dev hdf5-tools libopenblas-dev libopenmpi-dev openmpi-bin libmetis-dev metis python3-h5py python3-numpy curl ca-certificates unzip
  libptscotch-dev libmpich-dev mpich slurm-wlm munge iproute2 util-linux procps)

sudo=""
if [ "$(id -u)" != 0 ]; then sudo=sudo; fi

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

have_go() {
  command -v go >/dev/null 2>&1 || return 1
  local v; v=$(go env GOVERSION 2>/dev/null | sed 's/^go//')
  [ "$(printf '%s\n1.26\n' "$v" | sort -V | head -n1)" = "1.26" ]
}
if ! have_go && [ ! -x /usr/local/go/bin/go ]; then
  echo "deps: installing Go $GO_VERSION into /usr/local/go"
  tmp=$(mktemp -d)
  curl -fsSL -o "$tmp/go.zip" "https://proxy.golang.org/golang.org/toolchain/@v/v0.0.1-go${GO_VERSION}.linux-$(dpkg --print-architecture).zip"
  unzip -q "$tmp/go.zip" -d "$tmp"
  $sudo rm -rf /usr/local/go
  $sudo mv "$tmp/golang.org/toolchain@v0.0.1-go${GO_VERSION}.linux-$(dpkg --print-architecture)" /usr/local/go
  $sudo chmod +x /usr/local/go/bin/* /usr/local/go/pkg/tool/*/* 2>/dev/null || true
  rm -rf "$tmp"
fi
