#!/usr/bin/env bash
# Makes sure the spin model checker and a C compiler are installed, for the
# model check of the delivery protocol (model/, go test ./model/): installs
# Debian's spin and gcc packages with apt-get (through sudo when not root)
# when either is missing. Without them the model test skips (fails in CI).
set -euo pipefail

if command -v spin >/dev/null && command -v gcc >/dev/null; then
  exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then sudo="sudo -n"; fi
if command -v apt-get >/dev/null && { [ "$(id -u)" = 0 ] || [ -n "$sudo" ]; }; then
  $sudo apt-get install -y --no-install-recommends spin gcc >&2 ||
    { $sudo apt-get update >&2 && $sudo apt-get install -y --no-install-recommends spin gcc >&2; } ||
    echo "devspin.sh: could not install spin and gcc; the model check will skip (or fail in CI)" >&2
else
  echo "devspin.sh: spin or gcc is missing and cannot be installed here (apt-get install spin gcc); the model check will skip (or fail in CI)" >&2
fi
