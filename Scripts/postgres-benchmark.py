#!/usr/bin/env python3
"""PostgresRateLimitStore beside pgbench running the store's own statement, the naive transaction
and Redis, interleaved in one run; then a hot denied key, and the middleware when most requests
are denied.

    (cd Benchmarks/PostgreSQL && swift build -c release)
    Scripts/with-postgres.sh python3 Scripts/postgres-benchmark.py \\
        Benchmarks/PostgreSQL/.build/release/pace-postgres-benchmark [SECONDS] [ROUNDS] [EXAMPLE_SERVER]

Needs the database of Scripts/with-postgres.sh (PACE_POSTGRES_URL, PACE_POSTGRES_BIN), pgbench
(Debian's postgresql), and optionally redis-server with redis-benchmark, and wrk with the
example server (`swift build --package-path Examples/PaceExampleServer --scratch-path .build-server`).
Prints medians over the rounds, and each figure's ratio to pgbench in the same cell.
"""
import glob
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

binary = sys.argv[1]
seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
server = sys.argv[4] if len(sys.argv) > 4 else None
url = os.environ["PACE_POSTGRES_URL"]
# pgbench comes with Debian's postgresql, beside the server, which may not be on the PATH.
pgbench_path = shutil.which("pgbench") or sorted(glob.glob("/usr/lib/postgresql/*/bin/pgbench"))[-1]
table = "bench_rate_limits"
increment, tolerance = 60, 60_000  # the executable's limit: 1,000,000 per 60 s, burst 1000
budget = 900_000
work = tempfile.mkdtemp(prefix="pace-bench-")


def run(*command, **kwargs):
    return subprocess.run(command, check=True, capture_output=True, text=True, **kwargs).stdout


def swift(*arguments):
    return run(binary, *arguments).split()


# The store's statement, from the code, as pgbench variables.
sql = run(binary, "sql", table).strip()
for number, name in [(5, "lt"), (4, "budget"), (3, "tol"), (2, "inc"), (1, "key")]:
    sql = sql.replace(f"${number}", f":{name}")
scripts = {}
for keys, choose in [("hot", "\\set k 0"), ("random", "\\set k random(1, 100000)")]:
    path = os.path.join(work, f"{keys}.sql")
    with open(path, "w") as file:
        # pgbench's variables are numbers: the key is built from one, as the executable's keys are.
        file.write(f"{choose}\n")
        file.write(sql.replace(":key", "('key-' || :k)") + ";\n")
    scripts[keys] = path


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] if values else 0


def pgbench(callers, keys):
    prefix = os.path.join(work, f"log-{callers}-{keys}")
    for old in os.listdir(work):
        if old.startswith(os.path.basename(prefix) + "."):
            os.remove(os.path.join(work, old))
    run(
        pgbench_path, "-n", "-M", "prepared", "-f", scripts[keys], "-c", str(callers), "-j", str(min(callers, 2)),
        "-T", str(int(seconds)), "-D", f"inc={increment}", "-D", f"tol={tolerance}", "-D", f"budget={budget}",
        "-D", f"lt={budget // 1000}ms", "-l", "--log-prefix", prefix, url, cwd=work)
    latencies = []
    for name in os.listdir(work):
        if name.startswith(os.path.basename(prefix) + "."):
            with open(os.path.join(work, name)) as log:
                latencies += [int(line.split()[2]) / 1000 for line in log if line.strip()]
    return len(latencies) / seconds, percentile(latencies, 0.5), percentile(latencies, 0.99)


redis = None
if shutil.which("redis-server") and shutil.which("redis-benchmark"):
    port = "6390"
    redis = subprocess.Popen(["redis-server", "--port", port, "--save", "", "--appendonly", "no"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    # GCRA as CL.THROTTLE does it: the TAT in microseconds of Redis's clock, one key per bucket.
    lua = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local new = tat + tonumber(ARGV[1])
if new - now > tonumber(ARGV[2]) then return {0, tat + tonumber(ARGV[1]) - tonumber(ARGV[2]) - now} end
redis.call('SET', KEYS[1], new, 'PX', math.ceil((new - now) / 1000) + 1)
return {1, 0}
"""
    sha = run("redis-cli", "-p", port, "SCRIPT", "LOAD", lua).strip()


def redis_cell(callers, keys):
    key = "key-0" if keys == "hot" else "key-__rand_int__"
    requests = str(int(seconds * 30_000))
    out = run("redis-benchmark", "-p", port, "-c", str(callers), "-n", requests, "-r", "100000", "--csv",
              "EVALSHA", sha, "1", key, str(increment), str(tolerance))
    fields = [field.strip('"') for field in out.strip().splitlines()[-1].split(",")]
    return float(fields[1]), float(fields[4]), float(fields[6])


swift("setup", table)
systems = ["pgbench -M prepared", "PostgresRateLimitStore", "naive transaction"] + (["Redis GCRA (Lua)"] if redis else [])
results = {}
for round in range(rounds):
    for callers in [1, 4, 16]:
        for keys in ["hot", "random"]:
            for system in systems:
                if system.startswith("pgbench"):
                    figures = pgbench(callers, keys)
                elif system.startswith("Postgres"):
                    figures = tuple(map(float, swift("store", str(callers), keys, str(seconds), table)))
                elif system.startswith("naive"):
                    figures = tuple(map(float, swift("naive", str(callers), keys, str(seconds), table)))
                else:
                    figures = redis_cell(callers, keys)
                results.setdefault((callers, keys, system), []).append(figures)
                print(f"round {round + 1}: {callers:2} callers, {keys:6}, {system}: {figures[0]:.0f}/s", file=sys.stderr)

print(f"Decisions, medians of {rounds} interleaved rounds of {seconds:g} s per cell:\n")
print("| callers | keys | who decides | decisions/s | p50 (ms) | p99 (ms) | x pgbench |")
print("|---:|---|---|---:|---:|---:|---:|")
for callers in [1, 4, 16]:
    for keys in ["hot", "random"]:
        reference = statistics.median(figures[0] for figures in results[(callers, keys, systems[0])])
        for system in systems:
            cells = results[(callers, keys, system)]
            rate, p50, p99 = (statistics.median(figures[i] for figures in cells) for i in range(3))
            label = "hot key" if keys == "hot" else "random of 100k"
            print(f"| {callers} | {label} | {system} | {rate:,.0f} | {p50:.2f} | {p99:.2f} | {rate / reference:.2f}x |")

print("\nA hot key already denied (1 permit per hour), answered by the denial cache:\n")
print("| callers | decisions/s | round trips/s |")
print("|---:|---:|---:|")
for callers in [1, 16]:
    rate, trips = swift("denied", str(callers), str(seconds), table)
    print(f"| {callers} | {float(rate):,.0f} | {float(trips):.1f} |")

if redis:
    redis.terminate()

if server and shutil.which("wrk"):
    # The middleware when most requests are denied (1 request per minute for the one API key),
    # over the PostgreSQL store and in memory, interleaved.
    flags = ["--permits", "1", "--per", "60", "--api-key", "bench", "--log-level", "error"]
    servers = [subprocess.Popen([server, "--port", "8093"] + flags, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
               subprocess.Popen([server, "--port", "8094", "--postgres", url] + flags,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    time.sleep(3)
    middleware = {}
    for round in range(rounds):
        for port, name in [("8093", "in memory"), ("8094", "PostgreSQL store")]:
            out = run("wrk", "-t2", "-c16", f"-d{int(seconds)}s", "--latency", "-H", "X-API-Key: bench",
                      f"http://127.0.0.1:{port}/")
            rate = float(next(line.split()[1] for line in out.splitlines() if line.startswith("Requests/sec")))
            middleware.setdefault(name, []).append(rate)
    for process in servers:
        process.terminate()
    print("\nThe middleware when most requests are denied (wrk -t2 -c16, one API key allowed 1 per minute):\n")
    print("| server | requests/s | x in memory |")
    print("|---|---:|---:|")
    memory = statistics.median(middleware["in memory"])
    for name, rates in middleware.items():
        print(f"| {name} | {statistics.median(rates):,.0f} | {statistics.median(rates) / memory:.2f}x |")
shutil.rmtree(work)
