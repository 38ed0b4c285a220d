#!/usr/bin/env bash
# The project's one test command (README, .ci/run): formatting, vet, and every
# test under the race detector, including the Vault backend against a real
# Vault dev server that scripts/devvault.sh builds (or reuses from its cache).
set -euo pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  printf 'gofmt needed:\n%s\n' "$unformatted" >&2
  exit 1
fi
go vet ./...

EDGESECRETS_VAULT_BIN=$(scripts/devvault.sh)
export EDGESECRETS_VAULT_BIN

go test -race -count=1 -timeout 20m "$@" ./...
