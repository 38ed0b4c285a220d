#!/usr/bin/env bash
# Makes (once) the patched copy of Open Horizon's anax that the anax/ module
# is built and tested against, builds anax's hzn CLI, writes a go.work for
# this checkout, and prints, one per line:
#
#   EDGESECRETS_ANAX_SRC=<the patched anax copy>
#   EDGESECRETS_ANAX_WORK=<the go.work: this checkout's root, anax/ and the copy>
#   EDGESECRETS_HZN_BIN=<hzn>
#
# The copy and hzn are cached outside the work tree, keyed by the anax commit
# that ../shared/thirdparty/README.md records and the patches in anax/patches,
# so a fresh clone reuses them. hzn is built from the pristine tree with
# anax's own go.mod: the patch changes the config package hzn imports, and
# the tests run anax's CLI as published. The go.work is per checkout (keyed
# by its path) and rewritten on every run, with an empty go.work.sum: every
# checksum the combined build needs must come from the modules' own go.sum
# files (scripts/test.sh checks that go.work.sum stays empty).
# EDGESECRETS_THIRDPARTY overrides where the third-party source is.
#
#   eval "$(scripts/devanax.sh)"
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
thirdparty="${EDGESECRETS_THIRDPARTY:-$root/../shared/thirdparty}"
pristine="$thirdparty/anax"
if [ ! -f "$pristine/go.mod" ] || [ ! -f "$thirdparty/README.md" ]; then
  echo "devanax: no anax source at $pristine (open-horizon/anax, the commit anax/go.mod requires, with a README.md beside it recording that commit); set EDGESECRETS_THIRDPARTY to the directory holding it" >&2
  exit 1
fi
commit=$(grep -E '^\| *`anax/` *\|' "$thirdparty/README.md" | grep -oE '\b[0-9a-f]{40}\b' | head -n1 || true)
if [ -z "$commit" ]; then
  echo "devanax: $thirdparty/README.md records no commit for anax/" >&2
  exit 1
fi
shopt -s nullglob
patches=("$root"/anax/patches/*.patch)
shopt -u nullglob
if [ ${#patches[@]} -eq 0 ]; then
  echo "devanax: no patches in $root/anax/patches" >&2
  exit 1
fi
key=$( { echo "$commit"; cat "${patches[@]}"; } | sha256sum | cut -c1-16)
cache="${EDGESECRETS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/edgesecrets}"
dir="$cache/anax-$key"

if [ ! -x "$dir/hzn" ] || [ ! -f "$dir/src/go.mod" ]; then
  mkdir -p "$cache"
  echo "devanax: patching anax $commit and building hzn (first time: a few minutes)..." >&2
  tmp=$(mktemp -d "$cache/anax-$key.tmp.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  cp -R "$pristine" "$tmp/src"
  chmod -R u+w "$tmp/src"
  for p in "${patches[@]}"; do
    echo "devanax: applying $(basename "$p")" >&2
    patch -p1 --batch --forward --quiet -d "$tmp/src" <"$p" >&2
  done
  (cd "$pristine" && GOWORK=off CGO_ENABLED=0 go build -trimpath -buildvcs=false -o "$tmp/hzn" ./cli) >&2
  # Whoever renames first wins; a concurrent run's copy is the same.
  if ! mv -T "$tmp" "$dir" 2>/dev/null; then
    [ -x "$dir/hzn" ] || { echo "devanax: could not move $tmp to $dir" >&2; exit 1; }
  fi
  trap - EXIT
  rm -rf "$tmp"
fi

# The versions anax/go.mod requires of the two modules the workspace
# provides; go.work replaces exactly those, which the workspace alone does
# not (it still reads the required version's go.mod from the proxy).
req() {
  awk -v m="$1" '$1 == m { print $2; exit } $1 == "require" && $2 == m { print $3; exit }' "$root/anax/go.mod"
}
libv=$(req github.com/edgesecrets/edgesecrets)
anaxv=$(req github.com/open-horizon/anax)
if [ -z "$libv" ] || [ -z "$anaxv" ]; then
  echo "devanax: $root/anax/go.mod does not require github.com/edgesecrets/edgesecrets and github.com/open-horizon/anax" >&2
  exit 1
fi

workdir="$cache/work-$(printf '%s' "$root" | sha256sum | cut -c1-16)"
mkdir -p "$workdir"
cat >"$workdir/go.work.tmp" <<EOF
// Written by $root/scripts/devanax.sh for the checkout at $root.
go 1.26.0

use (
	"$root"
	"$root/anax"
	"$dir/src"
)

replace (
	github.com/edgesecrets/edgesecrets $libv => "$root"
	github.com/open-horizon/anax $anaxv => "$dir/src"
)
EOF
mv "$workdir/go.work.tmp" "$workdir/go.work"
rm -f "$workdir/go.work.sum"

echo "EDGESECRETS_ANAX_SRC=$dir/src"
echo "EDGESECRETS_ANAX_WORK=$workdir/go.work"
echo "EDGESECRETS_HZN_BIN=$dir/hzn"
