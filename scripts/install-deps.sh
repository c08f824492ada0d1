#!/usr/bin/env bash
# Installs the Debian packages gemmkit needs that are missing. Idempotent and quiet when
# everything is present. Usage: scripts/install-deps.sh {build|test|bench-libs|bench} [x86_64|arm64]
# bench-libs: what the benchmark programs link (the C++ peers); bench: that and PyTorch.
set -euo pipefail
what=${1:-test}
arch=${2:-$(uname -m | sed -e 's/aarch64/arm64/')}
host=$(uname -m | sed -e 's/aarch64/arm64/')

pkgs=(g++ make pkg-config libcpuinfo-dev)
case "$what" in
  build) ;;
  # libblas-test: Debian's netlib BLAS testers, run against the library by make test.
  # cmake: the test that builds a CMake project against the installed package.
  test) pkgs+=(googletest libgtest-dev libblas-test cmake) ;;
  # libblis4-openmp: BLIS, the GEMM table's second peer (dlopen'ed, so no headers).
  bench-libs | bench) pkgs+=(libbenchmark-dev libopenblas-dev libblis4-openmp libdnnl-dev gnuplot-nox) ;;
  *) echo "install-deps: unknown target '$what' (build, test, bench-libs or bench)" >&2; exit 2 ;;
esac
# PyTorch (a large download) is the whole-network reference: bench only, never test.
[ "$what" = bench ] && pkgs+=(python3-torch python3-torchvision python3-numpy)
if [ "$arch" != "$host" ]; then
  pkgs+=(g++-aarch64-linux-gnu)
  # qemu-user runs the cross-built tests; a plain cross build needs only the compiler.
  [ "$what" = build ] || pkgs+=(qemu-user googletest)
fi

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "install-deps: missing Debian packages: ${missing[*]}" >&2
    echo "install-deps: run as root, or: sudo apt-get install ${missing[*]}" >&2
    exit 1
  fi
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if [ "$arch" = arm64 ] && [ "$host" != arm64 ]; then
  "$(dirname "$0")/arm64-sysroot.sh"
fi
