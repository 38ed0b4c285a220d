#!/usr/bin/env bash
# The project's one test command (README, .ci/run): formatting, vet, linters, and every
# test under the race detector, including the Vault backend against a real
# Vault dev server that scripts/devvault.sh builds (or reuses from its cache)
# and the PostgreSQL tests against throwaway servers of the PostgreSQL that
# scripts/devpostgres.sh finds (or installs from Debian's packages).
set -euo pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  printf 'gofmt needed:\n%s\n' "$unformatted" >&2
  exit 1
fi
go vet ./...

# golangci-lint's default linters and staticcheck on non-test code, at
# pinned versions installed through the Go module proxy (scripts/devlint.sh).
lint_bin=$(scripts/devlint.sh)
"$lint_bin/golangci-lint" run --tests=false ./...
"$lint_bin/staticcheck" -tests=false ./...

# curl and jq run open-horizon/examples' helloSecretWorld script against the
# example agent (examples/hellosecretworld_test.go). Installed from Debian's
# packages when missing and we may; without them that test skips (fails in CI).
if ! command -v curl >/dev/null || ! command -v jq >/dev/null; then
  sudo=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then sudo="sudo -n"; fi
  if command -v apt-get >/dev/null && { [ "$(id -u)" = 0 ] || [ -n "$sudo" ]; }; then
    $sudo apt-get install -y --no-install-recommends curl jq >&2 ||
      { $sudo apt-get update >&2 && $sudo apt-get install -y --no-install-recommends curl jq >&2; } ||
      echo "test.sh: could not install curl and jq; the helloSecretWorld test will skip (or fail in CI)" >&2
  fi
fi

# spin and gcc run the model check of the delivery protocol (model/).
scripts/devspin.sh

# PostgreSQL first: an install may ask for sudo, better now than after the
# Vault build.
EDGESECRETS_POSTGRES_BIN=$(scripts/devpostgres.sh)
export EDGESECRETS_POSTGRES_BIN
EDGESECRETS_VAULT_BIN=$(scripts/devvault.sh)
export EDGESECRETS_VAULT_BIN

go test -race -count=1 -timeout 20m "$@" ./...
