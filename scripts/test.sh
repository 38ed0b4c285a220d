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
# The library builds as its own module: no go.work from the environment or a
# parent folder (the anax steps below set theirs explicitly).
export GOWORK=off

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

# The Open Horizon pieces: the vault-exchange-auth plugin that
# internal/testkit/ohtest registers with the Vault dev server, and the
# patched anax (with hzn and the go.work joining this checkout, anax/ and the
# patched copy) that the anax module builds against (scripts/devanax.sh).
if [ ! -f scripts/devvaultauth.sh ]; then
  echo "test.sh: scripts/devvaultauth.sh is missing (it builds the vault-exchange-auth plugin)" >&2
  exit 1
fi
EDGESECRETS_VAULT_AUTH_PLUGIN_DIR=$(bash scripts/devvaultauth.sh)
export EDGESECRETS_VAULT_AUTH_PLUGIN_DIR
anax_env=$(bash scripts/devanax.sh)
while IFS='=' read -r k v; do
  case "$k" in
    EDGESECRETS_ANAX_SRC | EDGESECRETS_ANAX_WORK | EDGESECRETS_HZN_BIN) export "$k=$v" ;;
  esac
done <<<"$anax_env"
: "${EDGESECRETS_ANAX_SRC:?scripts/devanax.sh printed no EDGESECRETS_ANAX_SRC}"
: "${EDGESECRETS_ANAX_WORK:?scripts/devanax.sh printed no EDGESECRETS_ANAX_WORK}"
: "${EDGESECRETS_HZN_BIN:?scripts/devanax.sh printed no EDGESECRETS_HZN_BIN}"

go test -race -count=1 -timeout 20m "$@" ./...

# The anax module, its own module (the root's ./... skips it), in the
# workspace; then, in the same combined build, anax's own unit tests (as its
# Makefile runs them: -tags=unit, CGO_ENABLED=0) of the packages the patch
# and the plugin touch, and the patched anax main, which links the plugin in.
(cd anax && GOWORK=$EDGESECRETS_ANAX_WORK go vet ./...)
(cd anax && GOWORK=$EDGESECRETS_ANAX_WORK "$lint_bin/golangci-lint" run ./...)
(cd anax && GOWORK=$EDGESECRETS_ANAX_WORK go test -race -count=1 -timeout 20m "$@" ./...)
(cd "$EDGESECRETS_ANAX_SRC" && GOWORK=$EDGESECRETS_ANAX_WORK CGO_ENABLED=0 \
  go test -tags=unit -count=1 -timeout 20m ./config/... ./agreementbot/secrets/... ./agreementbot/)
(cd "$EDGESECRETS_ANAX_SRC" && GOWORK=$EDGESECRETS_ANAX_WORK CGO_ENABLED=0 go build -o /dev/null .)
# Every checksum the combined build needs is committed (anax/go.sum beside
# the library's and anax's own); a sum the go command had to fetch lands in
# the workspace's go.work.sum, which scripts/devanax.sh emptied.
if [ -s "$EDGESECRETS_ANAX_WORK.sum" ]; then
  printf 'test.sh: the combined build needed checksums no go.sum holds; add these lines to anax/go.sum:\n' >&2
  cat "$EDGESECRETS_ANAX_WORK.sum" >&2
  exit 1
fi
