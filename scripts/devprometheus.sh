#!/usr/bin/env bash
# Makes sure Prometheus and promtool from Debian's `prometheus` package are
# at hand and prints the directory holding both. internal/testkit/promtest starts
# its throwaway servers, and runs promtool, from there.
#
#   EDGESECRETS_PROMETHEUS_BIN=$(scripts/devprometheus.sh)
#
# The directory is, in this order: EDGESECRETS_PROMETHEUS_BIN when set (it
# must hold both programs); /usr/bin when the package is installed; or the
# package's two programs unpacked into the cache that devvault.sh uses
# (~/.cache/edgesecrets/prometheus-<version>/usr/bin). The package is not
# installed: its maintainer scripts would start a Prometheus service (on
# port 9090, through init.d where there is no systemd, failing the install
# where that fails) and add a system user. Only `apt-get download` and
# `dpkg-deb -x` run, the package lists refreshed once (as root, through
# sudo -n otherwise) when the first download fails.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=debpkg.sh
. "$here/debpkg.sh"

needed=(prometheus promtool)

has_programs() {
  local p
  for p in "${needed[@]}"; do
    [ -f "$1/$p" ] && [ -x "$1/$p" ] || return 1
  done
}

if [ -n "${EDGESECRETS_PROMETHEUS_BIN:-}" ]; then
  if ! has_programs "$EDGESECRETS_PROMETHEUS_BIN"; then
    echo "devprometheus: EDGESECRETS_PROMETHEUS_BIN=$EDGESECRETS_PROMETHEUS_BIN does not hold ${needed[*]}" >&2
    exit 1
  fi
  echo "$EDGESECRETS_PROMETHEUS_BIN"
  exit 0
fi
if has_programs /usr/bin; then
  echo /usr/bin
  exit 0
fi

cache="${EDGESECRETS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/edgesecrets}"
for dir in "$cache"/prometheus-*/usr/bin; do
  if has_programs "$dir"; then
    echo "$dir"
    exit 0
  fi
done

if ! command -v apt-get >/dev/null || ! command -v dpkg-deb >/dev/null; then
  echo "devprometheus: no prometheus and promtool, and no apt-get and dpkg-deb to get Debian's package;" >&2
  echo "devprometheus: install Prometheus 2.x and set EDGESECRETS_PROMETHEUS_BIN to the directory holding prometheus and promtool" >&2
  exit 1
fi
echo "devprometheus: unpacking Debian's prometheus package into $cache (first time only)..." >&2
mkdir -p "$cache"
work=$(mktemp -d "$cache/prometheus.tmp-XXXXXX")
trap 'rm -rf "$work"' EXIT
# apt-get download writes into the current directory. (As root it warns
# that the _apt user cannot write there, and downloads as root instead.)
if ! (cd "$work" && debpkg_apt apt-get download -q prometheus); then
  echo "devprometheus: could not download Debian's prometheus package (apt-get download prometheus)" >&2
  exit 1
fi
debs=("$work"/prometheus_*.deb)
if [ ! -f "${debs[0]}" ]; then
  echo "devprometheus: apt-get download prometheus left no package in $work" >&2
  exit 1
fi
version=$(dpkg-deb --field "${debs[0]}" Version)
dpkg-deb -x "${debs[0]}" "$work/unpacked"
# Keep only the two programs (they need nothing but libc).
mkdir -p "$work/keep/usr/bin"
for p in "${needed[@]}"; do
  mv "$work/unpacked/usr/bin/$p" "$work/keep/usr/bin/$p"
done
if ! has_programs "$work/keep/usr/bin" || ! "$work/keep/usr/bin/promtool" --version >/dev/null 2>&1; then
  echo "devprometheus: the prometheus package $version did not yield working ${needed[*]}" >&2
  exit 1
fi
# Renamed into place whole: a concurrent run sees all or nothing, and the
# loser of a race keeps the winner's copy.
dest="$cache/prometheus-${version//[^A-Za-z0-9.+~-]/_}"
mv -T "$work/keep" "$dest" 2>/dev/null || has_programs "$dest/usr/bin"
echo "$dest/usr/bin"
