#!/usr/bin/env bash
# Unpacks Debian's arm64 libcpuinfo (headers, library) into .deps/arm64-sysroot for the
# cross build, without `dpkg --add-architecture`: apt gets its own arm64 package lists in
# a private folder and only downloads the two .debs. Idempotent: does nothing when done.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
sysroot=${ARM64_SYSROOT:-$root/.deps/arm64-sysroot}
stamp=$sysroot/.complete
[ -f "$stamp" ] && exit 0

work=$root/.deps/arm64-apt
mkdir -p "$work/lists/partial" "$work/debs" "$sysroot"
opts=(-o APT::Architecture=arm64 -o APT::Architectures=arm64 -o Dir::State::Lists="$work/lists")
echo "arm64-sysroot: fetching libcpuinfo for arm64"
apt-get "${opts[@]}" --error-on=any -qq update
(cd "$work/debs" && apt-get "${opts[@]}" -o APT::Sandbox::User=root -qq download libcpuinfo-dev libcpuinfo0)
for deb in "$work"/debs/*.deb; do dpkg -x "$deb" "$sysroot"; done
test -f "$sysroot/usr/include/cpuinfo.h"
test -e "$sysroot/usr/lib/aarch64-linux-gnu/libcpuinfo.so"
touch "$stamp"
echo "arm64-sysroot: ready in $sysroot"
