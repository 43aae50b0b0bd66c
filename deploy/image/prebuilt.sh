#!/bin/sh
# Prepares the files of the runtime image on the host, for an air-gapped build
# (no golang base image to pull): a static binary, the CA bundle, /etc/passwd
# and /etc/group with the non-root user, the data directory and /tmp, all
# under CONTEXT/dist/image/rootfs. Then:
#   podman build --build-arg BINARY=prebuilt -f Dockerfile -t schedulemaster CONTEXT
# CONTEXT defaults to the repository root. VERSION, COMMIT, DATE and GOARCH
# may be set in the environment.
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
ctx=${1:-$repo}
rootfs=$ctx/dist/image/rootfs
ca=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
[ -s "$ca" ] || { echo "prebuilt.sh: no CA bundle at $ca (install ca-certificates or set CA_BUNDLE)" >&2; exit 1; }
commit=${COMMIT:-$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)}
pkg=github.com/schedulemaster-go/schedulemaster/buildinfo

rm -rf "$rootfs"
mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc/ssl/certs" "$rootfs/var/lib/schedulemaster" "$rootfs/tmp"
(cd "$repo" && CGO_ENABLED=0 go build -trimpath \
  -ldflags "-s -w -X $pkg.version=${VERSION:-dev} -X $pkg.commit=$commit -X $pkg.date=${DATE:-$(date -u +%Y-%m-%dT%H:%M:%SZ)}" \
  -o "$rootfs/usr/local/bin/schedulemaster" ./cmd/schedulemaster)
cp "$ca" "$rootfs/etc/ssl/certs/ca-certificates.crt"
cp "$repo/deploy/image/etc/passwd" "$repo/deploy/image/etc/group" "$rootfs/etc/"
chmod 1777 "$rootfs/tmp"
echo "prebuilt.sh: $rootfs ready ($(du -sh "$rootfs" | cut -f1))"
