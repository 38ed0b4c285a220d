#!/usr/bin/env bash
# Installs, from Debian's packages, the packages of the commands that are
# missing, through apt-get (with sudo -n when not root), refreshing the
# package lists once if the first attempt fails. It never fails itself:
# without the commands, the tests that need them skip (and fail in CI).
#
#   scripts/debpkg.sh "<what needs them>" <command>=<package>...
set -euo pipefail
what=$1
shift
missing=()
for pair in "$@"; do
  command -v "${pair%%=*}" >/dev/null || missing+=("${pair#*=}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then sudo="sudo -n"; fi
if command -v apt-get >/dev/null && { [ "$(id -u)" = 0 ] || [ -n "$sudo" ]; }; then
  $sudo apt-get install -y --no-install-recommends "${missing[@]}" >&2 ||
    { $sudo apt-get update >&2 && $sudo apt-get install -y --no-install-recommends "${missing[@]}" >&2; } ||
    echo "debpkg.sh: could not install ${missing[*]}; $what will skip (or fail in CI)" >&2
else
  echo "debpkg.sh: ${missing[*]} missing and cannot be installed here (apt-get install ${missing[*]}); $what will skip (or fail in CI)" >&2
fi
