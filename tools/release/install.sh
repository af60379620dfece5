#!/usr/bin/env bash
# install.sh DIR puts GoReleaser and cyclonedx-gomod, at the versions
# tools/release/go.mod pins, in DIR (make release-tools). A build of the
# pinned version found already is reused: DIR's own, one on PATH, one in
# $(go env GOBIN) or $(go env GOPATH)/bin, or .ci/run's cached build
# (~/.cache/toold-ci). A binary counts as the pinned build when the module
# version and checksum Go stamped into it (go version -m) are the ones
# tools/release/go.sum names. Only when none is found is one built: about
# 16 minutes for GoReleaser on 2 cores the first time (its modules and
# packages then stay in Go's caches, and the next build only links).
# RELEASE_TOOLS_NO_BUILD=1 fails instead of building (the tests use it).
set -euo pipefail
dir=$1
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$dir"
cache="${TOOLD_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/toold-ci}"
gobin="$(go env GOBIN)"
[ -n "$gobin" ] || gobin="$(go env GOPATH)/bin"

# pinned MODULE: "version h1:sum" as go.sum names the module's code.
pinned() { awk -v m="$1" '$1 == m && $2 !~ /\/go\.mod$/ { print $2, $3 }' "$here/go.sum"; }
# stamped BINARY MODULE: "version h1:sum" as Go stamped the module into it.
stamped() {
  go version -m "$1" 2>/dev/null | awk -v m="$2" '($1 == "mod" || $1 == "dep") && $2 == m { print $3, $4; exit }'
}

missing=0
for tool in "goreleaser github.com/goreleaser/goreleaser/v2" "cyclonedx-gomod github.com/CycloneDX/cyclonedx-gomod"; do
  read -r name module <<<"$tool"
  want=$(pinned "$module")
  [ -n "$want" ] || { echo "install.sh: $module is not in $here/go.sum" >&2; exit 1; }
  found=""
  for c in "$dir/$name" "$(command -v "$name" || true)" "$gobin/$name" $(ls -t "$cache/$name"-* 2>/dev/null | grep -v '\.tmp$' || true); do
    if [ -n "$c" ] && [ -x "$c" ] && [ "$(stamped "$c" "$module")" = "$want" ]; then
      found=$c
      break
    fi
  done
  if [ -z "$found" ]; then
    echo "$name ${want%% *}: no build of it found (in $dir, on PATH, in $gobin, in $cache)"
    missing=1
    continue
  fi
  [ "$found" -ef "$dir/$name" ] || cp "$found" "$dir/$name"
  echo "$name ${want%% *}: reusing $found"
done
if [ "$missing" = 1 ]; then
  if [ "${RELEASE_TOOLS_NO_BUILD:-}" = 1 ]; then
    echo "install.sh: RELEASE_TOOLS_NO_BUILD=1: not building" >&2
    exit 1
  fi
  echo "building them from tools/release (GoReleaser takes about 16 minutes on 2 cores the first time; later runs reuse the build)"
  GOBIN="$dir" go -C "$here" install tool
fi
