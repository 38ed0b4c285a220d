#!/usr/bin/env bash
# Counts the exported identifiers and fields of the module's public
# packages and prints the Markdown table ARCHITECTURE.md's "Size of the API"
# section holds.
#
#   bash scripts/apicount.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
exec go run ./tools/apicount "$root"
