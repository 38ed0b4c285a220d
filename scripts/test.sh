#!/usr/bin/env bash
# The project's one test command (README, .ci/run): formatting, vet, linters, and every
# test under the race detector, including the Vault backend against a real
# Vault dev server that scripts/devvault.sh builds (or reuses from its cache),
# the PostgreSQL tests against throwaway servers of the PostgreSQL that
# scripts/devpostgres.sh finds (or installs from Debian's packages), and the
# Prometheus tests (the alert rules' promtool tests, throwaway servers)
# against the Prometheus that scripts/devprometheus.sh finds (or unpacks
# from Debian's package).
set -euo pipefail
cd "$(dirname "$0")/.."

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  printf 'gofmt needed:\n%s\n' "$unformatted" >&2
  exit 1
fi
go vet ./...

# golangci-lint as .golangci.yml configures it (the standard linters,
# errorlint, a cognitive complexity bound and the layering rules) over the
# code and its tests, and staticcheck's own defaults on the code, at pinned
# versions installed through the Go module proxy (scripts/devlint.sh).
lint_bin=$(scripts/devlint.sh)
"$lint_bin/golangci-lint" run ./...
"$lint_bin/staticcheck" -tests=false ./...

# curl and jq run open-horizon/examples' helloSecretWorld script against the
# example agent (examples/hellosecretworld_test.go); spin and gcc run the
# model check of the delivery protocol (model/).
scripts/debpkg.sh "the helloSecretWorld test" curl=curl jq=jq
scripts/debpkg.sh "the model check" spin=spin gcc=gcc

# PostgreSQL and Prometheus first: an install may ask for sudo, better now
# than after the Vault build.
EDGESECRETS_POSTGRES_BIN=$(scripts/devpostgres.sh)
export EDGESECRETS_POSTGRES_BIN
EDGESECRETS_PROMETHEUS_BIN=$(scripts/devprometheus.sh)
export EDGESECRETS_PROMETHEUS_BIN
EDGESECRETS_VAULT_BIN=$(scripts/devvault.sh)
export EDGESECRETS_VAULT_BIN

go test -race -count=1 -timeout 20m "$@" ./...
