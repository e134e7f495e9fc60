#!/usr/bin/env bash
# The rate-limit middleware during a PostgreSQL outage, beside the same server in memory, in one
# run: requests/s and latency with wrk, then how long after the database restarts the circuit
# breaker closes.
#
#   (cd Examples/PaceExampleServer && swift build [-c release] --product pace-example-server)
#   Scripts/outage-benchmark.sh [Examples/PaceExampleServer/.build/release/pace-example-server] [seconds per cell]
#
# Starts a throwaway cluster of its own (Debian's postgresql, as Scripts/with-postgres.sh finds
# it), two example servers (in memory on 8091, on the database on 8092, limits so high that every
# request is allowed), stops the database with `pg_ctl -m immediate`, and measures both servers
# interleaved, twice. Needs wrk (Debian's `wrk`).
set -euo pipefail
server=${1:-Examples/PaceExampleServer/.build/debug/pace-example-server}
seconds=${2:-5}
command -v wrk >/dev/null || { echo "outage-benchmark: needs wrk (apt-get install wrk)" >&2; exit 64; }
bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[ -n "$bin" ] || { echo "outage-benchmark: needs Debian's postgresql" >&2; exit 64; }
owner=$(id -un)
run_as=()
if [ "$(id -u)" -eq 0 ]; then owner=postgres; run_as=(runuser -u postgres --); fi
dir=$(mktemp -d -t pace-outage.XXXXXX)
chown "$owner" "$dir"
chmod 700 "$dir"
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  "${run_as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM
start_db() {
  "${run_as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w \
    -o "-h 127.0.0.1 -p $port -k $dir -c fsync=off" start >/dev/null
}
"${run_as[@]}" "$bin/initdb" -D "$dir/data" -U "$owner" --auth=trust --no-sync -E UTF8 >/dev/null
start_db
flags=(--permits 100000000 --per 1 --api-key bench --log-level error)
"$server" --port 8091 "${flags[@]}" >"$dir/memory.log" 2>&1 & pids+=($!)
"$server" --port 8092 "${flags[@]}" --postgres "postgres://$owner@127.0.0.1:$port/postgres" >"$dir/postgres.log" 2>&1 & pids+=($!)
for _ in $(seq 1 100); do
  curl -sf -o /dev/null -H 'X-API-Key: bench' localhost:8092/ && curl -sf -o /dev/null localhost:8091/ && break
  sleep 0.2
done
"${run_as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate -w stop >/dev/null
echo "== database stopped; the failures that open the breaker (each waits the store's 1 s timeout):"
for _ in 1 2 3 4 5 6; do curl -s -o /dev/null -w "   %{http_code} in %{time_total} s\n" -H 'X-API-Key: bench' localhost:8092/; done
echo "| round | server | requests/s | p50 | p99 |"
echo "|---:|---|---:|---:|---:|"
for round in 1 2; do
  for cell in "8091 in memory" "8092 PostgreSQL down, breaker open"; do
    set -- $cell
    out=$(wrk -t2 -c16 -d"${seconds}s" --latency -H 'X-API-Key: bench' "http://127.0.0.1:$1/")
    rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    shift
    echo "| $round | $* | $rps | $p50 | $p99 |"
  done
done
start_db
started=$(date +%s.%N)
for _ in $(seq 1 600); do
  curl -s -o /dev/null -H 'X-API-Key: bench' localhost:8092/
  if curl -s localhost:8092/metrics | grep -q 'to="closed"} [1-9]'; then
    echo "== the breaker closed $(python3 -c "print(round($(date +%s.%N) - $started, 2))") s after the database started again"
    exit 0
  fi
  sleep 0.05
done
echo "== the breaker did not close within 30 s of the database starting again" >&2
exit 1
