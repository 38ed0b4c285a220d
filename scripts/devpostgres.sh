#!/usr/bin/env bash
# Makes sure the PostgreSQL server from Debian's packages is installed
# (installing it with apt-get, through sudo when not root, if no
# /usr/lib/postgresql/*/bin has it) and prints that bin directory, the newest
# version when several are installed. internal/testkit/pgtest starts its
# throwaway clusters from there. A PostgreSQL installed otherwise is used when
# EDGESECRETS_POSTGRES_BIN already names its bin directory.
#
#   EDGESECRETS_POSTGRES_BIN=$(scripts/devpostgres.sh)
#
# PostgreSQL refuses to run as root: when run as root, the script also creates
# (once) the system user that internal/testkit/pgtest runs the servers as,
# edgesecrets-pg, or the one EDGESECRETS_POSTGRES_USER names.
set -euo pipefail

# The programs internal/testkit/pgtest runs from the bin directory.
needed=(initdb postgres pg_dump)

has_programs() {
  local p
  for p in "${needed[@]}"; do
    [ -x "$1/$p" ] || return 1
  done
}

find_bin() {
  if [ -n "${EDGESECRETS_POSTGRES_BIN:-}" ]; then
    has_programs "$EDGESECRETS_POSTGRES_BIN" && echo "$EDGESECRETS_POSTGRES_BIN"
    return
  fi
  local dir best=
  for dir in /usr/lib/postgresql/*/bin; do
    # Keep the highest major version (the glob sorts 10 before 9).
    if has_programs "$dir" && { [ -z "$best" ] || [ "$(version "$dir")" -gt "$(version "$best")" ]; }; then
      best=$dir
    fi
  done
  [ -n "$best" ] && echo "$best"
}

# The major version a bin directory is for: 15 for /usr/lib/postgresql/15/bin,
# 9 for .../9.6/bin.
version() {
  local v
  v=$(basename "$(dirname "$1")")
  v=${v%%.*}
  case $v in '' | *[!0-9]*) echo 0 ;; *) echo "$v" ;; esac
}

as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  elif command -v sudo >/dev/null; then
    sudo "$@"
  else
    echo "devpostgres: need root (or sudo) to run: $*" >&2
    return 1
  fi
}

if ! bin=$(find_bin); then
  if [ -n "${EDGESECRETS_POSTGRES_BIN:-}" ]; then
    echo "devpostgres: EDGESECRETS_POSTGRES_BIN=$EDGESECRETS_POSTGRES_BIN does not hold ${needed[*]}" >&2
    exit 1
  fi
  if ! command -v apt-get >/dev/null; then
    echo "devpostgres: no PostgreSQL server under /usr/lib/postgresql/*/bin and no apt-get to install one;" >&2
    echo "devpostgres: install PostgreSQL and set EDGESECRETS_POSTGRES_BIN to the directory holding initdb" >&2
    exit 1
  fi
  echo "devpostgres: installing the PostgreSQL server (apt-get install postgresql)..." >&2
  export DEBIAN_FRONTEND=noninteractive
  # A fresh machine may have no package lists yet: update once and retry.
  if ! as_root apt-get install -y -q postgresql >&2; then
    as_root apt-get update -q >&2
    as_root apt-get install -y -q postgresql >&2
  fi
  if ! bin=$(find_bin); then
    echo "devpostgres: postgresql installed, but no /usr/lib/postgresql/*/bin holds ${needed[*]}" >&2
    exit 1
  fi
fi

if [ "$(id -u)" -eq 0 ]; then
  user=${EDGESECRETS_POSTGRES_USER:-edgesecrets-pg}
  if ! id -u "$user" >/dev/null 2>&1; then
    echo "devpostgres: creating the system user $user to run test servers as" >&2
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin --comment "edgesecrets test PostgreSQL servers" "$user"
  fi
fi

echo "$bin"
