#!/usr/bin/env bash
# Installs, from Debian's packages, the packages of the commands that are
# missing, through apt-get (with sudo -n when not root), refreshing the
# package lists once if the first attempt fails. It never fails itself:
# without the commands, the tests that need them skip (and fail in CI).
#
#   scripts/debpkg.sh "<what needs them>" <command>=<package>...
#
# Sourced (. scripts/debpkg.sh), it only defines debpkg_root and
# debpkg_apt, for scripts that take Debian's packages another way
# (scripts/devprometheus.sh).

# debpkg_root prints the prefix that runs a command as root: nothing when
# root already, "sudo -n" when sudo is there. It fails when neither.
debpkg_root() {
  if [ "$(id -u)" = 0 ]; then
    echo ""
  elif command -v sudo >/dev/null; then
    echo "sudo -n"
  else
    return 1
  fi
}

# debpkg_apt runs its arguments (an apt-get command line) and, when that
# fails, refreshes the package lists once, as root, and runs it again: a
# fresh machine may have no lists yet, or stale ones. Output goes to stderr.
debpkg_apt() {
  "$@" >&2 && return 0
  local root
  root=$(debpkg_root) || return 1
  $root apt-get update -q >&2 && "$@" >&2
}

# Sourced: the functions are all.
if [ "${BASH_SOURCE[0]}" != "$0" ]; then
  return 0
fi

set -euo pipefail
what=$1
shift
missing=()
for pair in "$@"; do
  command -v "${pair%%=*}" >/dev/null || missing+=("${pair#*=}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if command -v apt-get >/dev/null && root=$(debpkg_root); then
  debpkg_apt $root apt-get install -y --no-install-recommends "${missing[@]}" ||
    echo "debpkg.sh: could not install ${missing[*]}; $what will skip (or fail in CI)" >&2
else
  echo "debpkg.sh: ${missing[*]} missing and cannot be installed here (apt-get install ${missing[*]}); $what will skip (or fail in CI)" >&2
fi
