#!/usr/bin/env bash
# Installs (once) golangci-lint and staticcheck at pinned versions through
# the Go module proxy and prints the directory holding them. They are
# cached outside the work tree, keyed by version, so a fresh clone reuses
# them.
#
#   LINT_BIN=$(scripts/devlint.sh)
set -euo pipefail
golangci_version=v2.15.0
staticcheck_version=v0.8.2
cache="${EDGESECRETS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/edgesecrets}"
bin="$cache/lint-$golangci_version-$staticcheck_version"
if [ ! -x "$bin/golangci-lint" ] || [ ! -x "$bin/staticcheck" ]; then
  mkdir -p "$bin"
  echo "devlint: installing golangci-lint $golangci_version and staticcheck $staticcheck_version (first time: a few minutes)..." >&2
  GOBIN="$bin" go install "github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$golangci_version" >&2
  GOBIN="$bin" go install "honnef.co/go/tools/cmd/staticcheck@$staticcheck_version" >&2
fi
echo "$bin"
