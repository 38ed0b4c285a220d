#!/usr/bin/env bash
# Builds (once) Open Horizon's Vault auth plugin (vault-exchange-auth, the
# auth/openhorizon method) from ../shared/thirdparty/vault-exchange-auth
# through the Go module proxy, and prints the directory holding it: a
# directory with the plugin binary only, named hznvaultauth as Open
# Horizon's Vault image has it, ready for `vault server -dev
# -dev-plugin-dir=<dir>`. The build is cached outside the work tree, keyed
# by the hash of the plugin's go.mod, go.sum and sources.
#
#   EDGESECRETS_VAULT_AUTH_PLUGIN_DIR=$(scripts/devvaultauth.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src="${EDGESECRETS_VAULT_AUTH_SRC:-$root/../shared/thirdparty/vault-exchange-auth}"
if [ ! -f "$src/go.mod" ]; then
  echo "devvaultauth: no vault-exchange-auth source at $src (see ../shared/thirdparty/README.md)" >&2
  exit 1
fi
src=$(cd "$src" && pwd)
key=$(cd "$src" && { cat go.mod go.sum; find . -name '*.go' -not -path './.git/*' | LC_ALL=C sort | xargs cat; } | sha256sum | cut -c1-16)
cache="${EDGESECRETS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/edgesecrets}"
dir="$cache/vaultauth-$key"
name=hznvaultauth
if [ ! -x "$dir/$name" ]; then
  mkdir -p "$cache"
  echo "devvaultauth: building the vault-exchange-auth plugin (first time: a few minutes)..." >&2
  tmp=$(mktemp -d "$cache/vaultauth-build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # The source directory is read-only: build from a copy.
  cp -R "$src" "$tmp/src"
  chmod -R u+w "$tmp/src"
  (cd "$tmp/src" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -o "$tmp/out/$name" .) >&2
  # Another run may have finished first: its directory is as good.
  mv -T "$tmp/out" "$dir" 2>/dev/null || [ -x "$dir/$name" ]
fi
echo "$dir"
