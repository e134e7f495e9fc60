#!/usr/bin/env bash
# Runs a command against a throwaway PostgreSQL cluster, then stops the cluster and deletes it.
#
#   Scripts/with-postgres.sh swift test --traits PostgreSQL,Hummingbird --filter PaceServerTests
#
# The cluster lives in a temporary directory, listens on a free loopback port, trusts local
# connections and is owned by an unprivileged user (initdb refuses root). The command sees
# PACE_POSTGRES_URL=postgres://USER@127.0.0.1:PORT/postgres, PACE_POSTGRES_BIN (the server's bin
# directory) and PACE_POSTGRES_OWNER (the user that runs clusters). Installs Debian's `postgresql`
# package first if no initdb is found (needs root).
#
# The cluster is throwaway: fsync, synchronous_commit and full_page_writes are off. With
# PACE_POSTGRES_DURABLE=1 they are on, as a production server runs them (for benchmarks of
# commits); PACE_POSTGRES_OPTIONS adds server settings (`-c name=value ...`).
set -euo pipefail

if [ "$#" -eq 0 ]; then
  echo "usage: $0 COMMAND [ARGUMENTS...]" >&2
  exit 64
fi

find_bin() {
  if command -v pg_ctl >/dev/null && command -v initdb >/dev/null && command -v postgres >/dev/null; then
    dirname "$(command -v postgres)"
    return
  fi
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
  [ -n "$dir" ] && echo "$dir"
}

bin=$(find_bin || true)
if [ -z "$bin" ]; then
  echo "== with-postgres: installing Debian's postgresql package" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq postgresql >&2
  bin=$(find_bin)
fi

# The cluster's owner: ourselves, or an unprivileged user when we are root.
run_as=()
owner=$(id -un)
if [ "$(id -u)" -eq 0 ]; then
  owner=${PACE_POSTGRES_OWNER:-postgres}
  id "$owner" >/dev/null 2>&1 || useradd --system --no-create-home "$owner"
  run_as=(runuser -u "$owner" --)
fi

dir=$(mktemp -d -t pace-postgres.XXXXXX)
chown "$owner" "$dir"
chmod 700 "$dir"

stop() {
  "${run_as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap stop EXIT INT TERM

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

"${run_as[@]}" "$bin/initdb" -D "$dir/data" -U "$owner" --auth=trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 ||
  { cat "$dir/initdb.log" >&2; exit 1; }
# fsync off: a throwaway cluster, unless durable. max_connections: the server tests run in
# parallel, each "instance" with its own pool (about 250 connections at the peak).
if [ "${PACE_POSTGRES_DURABLE:-0}" = 1 ]; then
  durability="fsync=on synchronous_commit=on full_page_writes=on"
else
  durability="fsync=off synchronous_commit=off full_page_writes=off"
fi
# In the configuration file rather than on the command line, which would override ALTER SYSTEM:
# a benchmark switches them between cells.
for setting in $durability; do echo "$setting" >>"$dir/data/postgresql.conf"; done
"${run_as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
  -o "-h 127.0.0.1 -p $port -k $dir -c max_connections=500 ${PACE_POSTGRES_OPTIONS:-}" \
  start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }

export PACE_POSTGRES_URL="postgres://$owner@127.0.0.1:$port/postgres"
export PACE_POSTGRES_BIN="$bin"
# Tests that stop and start a cluster of their own run its commands as this user.
export PACE_POSTGRES_OWNER="$owner"
echo "== with-postgres: $PACE_POSTGRES_URL ($("$bin/postgres" --version); $durability)" >&2
"$@"
