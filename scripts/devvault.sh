#!/usr/bin/env bash
# Builds (once) the Vault server from internal/devvault through the Go module
# proxy and prints the binary's path. The binary is cached outside the work
# tree, keyed by the nested module's go.sum, so a fresh clone reuses it.
#
#   VAULT_BIN=$(scripts/devvault.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
src="$root/internal/devvault"
key=$(cat "$src/go.mod" "$src/go.sum" "$src/main.go" | sha256sum | cut -c1-16)
cache="${EDGESECRETS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/edgesecrets}"
bin="$cache/vault-$key"
if [ ! -x "$bin" ]; then
  mkdir -p "$cache"
  echo "devvault: building the Vault server (first time: several minutes, ~4.5 GiB RAM)..." >&2
  (cd "$src" && CGO_ENABLED=0 go build -trimpath -o "$bin.tmp" .) >&2
  mv "$bin.tmp" "$bin"
fi
echo "$bin"
