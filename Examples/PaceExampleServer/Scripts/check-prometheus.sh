#!/usr/bin/env bash
# Checks the Grafana dashboard (grafana/pace-dashboard.json) against a real Prometheus: builds the
# example server, runs it on a throwaway PostgreSQL cluster (Scripts/with-postgres.sh at the
# repository's root), has Debian's Prometheus scrape its /metrics every second, puts it under a
# short load (rate-limited requests, limited ones among them, and debounced reindexing), then
# evaluates every panel's query through Prometheus's HTTP API. Fails unless each returns data.
#
#   Examples/PaceExampleServer/Scripts/check-prometheus.sh
#
# Installs Debian's `prometheus` package if no `prometheus` is found (needs root). Everything
# listens on 127.0.0.1 only. PACE_EXAMPLE_SCRATCH names the build's scratch path (default: the
# repository's .build-server, which CI's server step has built) and PACE_EXAMPLE_BUILD_FLAGS the
# flags it was built with; PACE_LOAD_SECONDS the load's
# length (default 20: long enough for the debouncer's 10 s maximum wait to run an execution).
set -euo pipefail

example=$(cd "$(dirname "$0")/.." && pwd)
root=$(cd "$example/../.." && pwd)

if [ "${1:-}" != "--inside-postgres" ]; then
  if ! command -v prometheus >/dev/null; then
    echo "== check-prometheus: installing Debian's prometheus package" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends prometheus >&2
  fi
  scratch=${PACE_EXAMPLE_SCRATCH:-$root/.build-server}
  # The flags of the build that made the scratch path, so that nothing is rebuilt (CI's are
  # `-Xswiftc -warnings-as-errors`).
  read -r -a flags <<<"${PACE_EXAMPLE_BUILD_FLAGS:-}"
  echo "== check-prometheus: building pace-example-server"
  swift build --package-path "$example" --scratch-path "$scratch" "${flags[@]}" --product pace-example-server 2>&1 |
    tail -n 1
  bin=$(swift build --package-path "$example" --scratch-path "$scratch" "${flags[@]}" --show-bin-path)
  exec "$root/Scripts/with-postgres.sh" "$0" --inside-postgres "$bin/pace-example-server"
fi

server_executable=$2
work=$(mktemp -d -t pace-prometheus.XXXXXX)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT INT TERM

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
server_port=$(free_port)
prometheus_port=$(free_port)

# Waits up to $2 seconds for URL $1 to answer 200.
wait_for() {
  local deadline=$((SECONDS + $2))
  until curl -fsS -o /dev/null "$1" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then
      echo "error: $1 did not answer within $2 s" >&2
      return 1
    fi
    sleep 0.2
  done
}

echo "== check-prometheus: the example server on 127.0.0.1:$server_port, shared through PostgreSQL"
"$server_executable" --postgres "$PACE_POSTGRES_URL" --port "$server_port" --log-level warning \
  >"$work/server.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$server_port/metrics" 120 || { cat "$work/server.log" >&2; exit 1; }

cat >"$work/prometheus.yml" <<YAML
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: pace-example-server
    static_configs:
      - targets: ["127.0.0.1:$server_port"]
YAML
echo "== check-prometheus: Prometheus on 127.0.0.1:$prometheus_port, scraping every second"
prometheus --config.file="$work/prometheus.yml" --storage.tsdb.path="$work/data" \
  --web.listen-address="127.0.0.1:$prometheus_port" --log.level=warn >"$work/prometheus.log" 2>&1 &
pids+=($!)
wait_for "http://127.0.0.1:$prometheus_port/-/ready" 60 || { cat "$work/prometheus.log" >&2; exit 1; }

load_seconds=${PACE_LOAD_SECONDS:-20}
echo "== check-prometheus: $load_seconds s of load"
python3 - "$server_port" "$load_seconds" <<'PY'
import sys, threading, time, urllib.error, urllib.request

port, seconds = int(sys.argv[1]), float(sys.argv[2])
end = time.monotonic() + seconds
counts = {}
lock = threading.Lock()

def request(method, path, headers):
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code

def worker(number):
    i = 0
    while time.monotonic() < end:
        i += 1
        # Twenty keys of ten requests a minute each, and every client's address: allowed, then limited.
        status = request("GET", "/", {"X-API-Key": f"load-{number}-{i % 5}"})
        debounced = request("POST", f"/documents/{i % 7}/changed", {})
        with lock:
            counts[status] = counts.get(status, 0) + 1
            counts[f"POST {debounced}"] = counts.get(f"POST {debounced}", 0) + 1
        time.sleep(0.01)

threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
for thread in threads: thread.start()
for thread in threads: thread.join()
print("   answers:", ", ".join(f"{key}: {value}" for key, value in sorted(counts.items(), key=str)))
PY
# Two more scrapes after the load, so that every rate has its last samples.
sleep 3

echo "== check-prometheus: every panel's query, through Prometheus's HTTP API"
python3 - "$prometheus_port" "$example/grafana/pace-dashboard.json" <<'PY'
import json, math, sys, urllib.parse, urllib.request

port, path = sys.argv[1], sys.argv[2]
dashboard = json.load(open(path))
failed, checked = [], 0
for panel in dashboard["panels"]:
    for target in panel.get("targets", []):
        checked += 1
        query = target["expr"]
        url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
        with urllib.request.urlopen(url, timeout=10) as response:
            answer = json.load(response)
        result = answer.get("data", {}).get("result", []) if answer.get("status") == "success" else []
        values = [float(sample["value"][1]) for sample in result]
        numbers = [value for value in values if not math.isnan(value)]
        verdict = "ok" if numbers else "NO DATA"
        print(f"   {verdict:7} {panel['title']} / {target.get('legendFormat', '')}: "
              f"{', '.join(f'{v:g}' for v in values) or '(empty)'}")
        if not numbers:
            failed.append(f"{panel['title']}: {query}")
if failed:
    print(f"error: {len(failed)} of {checked} panel queries returned no data:", file=sys.stderr)
    for line in failed: print(f"  {line}", file=sys.stderr)
    sys.exit(1)
print(f"== check-prometheus: all {checked} panel queries returned data")
PY
