#!/usr/bin/env python3
"""PostgresRateLimitStore beside pgbench running the store's single-decision statement as it was
before decisions were batched (frozen in Benchmarks/PostgreSQL/decision-before-batching.sql), the
same statement through PostgresNIO alone (each caller on a connection of its own, as pgbench's
clients are: the Swift driver's floor), the naive transaction and Redis, interleaved in one run; what each costs the primary (WAL and dead
tuples per decision) for each of the store's table options; the purge; a hot denied key; and the
middleware when most requests are denied.

    (cd Benchmarks/PostgreSQL && swift build -c release)
    Scripts/with-postgres.sh python3 Scripts/postgres-benchmark.py \\
        Benchmarks/PostgreSQL/.build/release/pace-postgres-benchmark [SECONDS] [ROUNDS] [EXAMPLE_SERVER] \\
        [--parts throughput,durable,load,purge,denied,middleware] [--callers 1,4,16,64]

Parts (all by default):
  throughput  decisions/s and latency (p50, p99) at each number of callers, hot and random keys,
              on the throwaway settings (fsync, synchronous_commit and full_page_writes off),
              and each decision's CPU: the client's (getrusage of the cell's process) and the
              server's (/proc: every process of the cluster, or redis-server);
  durable     the same cells, interleaved with them, with the three on, as production runs
              (switched with ALTER SYSTEM and a reload between cells; Redis is left out);
  load        WAL bytes, records and full-page images, updates, HOT updates and dead tuples per
              decision, and the table's size, for each table option (logged, unlogged, a fill
              factor of 100) and each PostgreSQL alternative, at 16 callers on random keys, with
              the durable settings (full_page_writes on, a CHECKPOINT before each cell, so each
              cell pays the full-page images of the pages it touches first);
  purge       seconds to delete 100,000 expired rows of 200,000, by purgeExpired() batches and by
              purgeAllExpired() (bounded page ranges);
  denied      a hot key already denied, answered by the denial cache;
  middleware  the example server under wrk (needs EXAMPLE_SERVER and wrk).

Needs the database of Scripts/with-postgres.sh (PACE_POSTGRES_URL, PACE_POSTGRES_BIN; its owner
must be a superuser, as the script's is), pgbench and psql (Debian's postgresql), and optionally
redis-server with redis-benchmark (`apt-get install -y redis-server`). Prints medians over the
rounds, and each figure's ratio to pgbench and to Redis in the same cell.
"""
import argparse
import atexit
import glob
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

parser = argparse.ArgumentParser()
parser.add_argument("binary")
parser.add_argument("seconds", nargs="?", type=float, default=3)
parser.add_argument("rounds", nargs="?", type=int, default=3)
parser.add_argument("server", nargs="?")
parser.add_argument("--parts", default="throughput,durable,load,purge,denied,middleware")
parser.add_argument("--callers", default="1,4,16,64")
options = parser.parse_args()
binary, seconds, rounds, server = options.binary, options.seconds, options.rounds, options.server
parts = set(options.parts.split(","))
caller_counts = [int(count) for count in options.callers.split(",")]
url = os.environ["PACE_POSTGRES_URL"]
bin_dir = os.environ.get("PACE_POSTGRES_BIN", "")


def tool(name):
    # pgbench, psql and pg_waldump come with Debian's postgresql, beside the server, which may not be on the PATH.
    beside = [os.path.join(bin_dir, name)] if bin_dir else []
    found = [path for path in beside + sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))[::-1]
             if os.access(path, os.X_OK)]
    return shutil.which(name) or (found[0] if found else name)


pgbench_path, psql_path, waldump_path = tool("pgbench"), tool("psql"), tool("pg_waldump")
increment, tolerance = 60, 60_000  # the executable's limit: 1,000,000 per 60 s, burst 1000
budget = 900_000
work = tempfile.mkdtemp(prefix="pace-bench-")
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
frozen = os.path.join(root, "Benchmarks", "PostgreSQL", "decision-before-batching.sql")

# Each table option in a schema of its own, the same table name in each: the frozen statement
# names `bench_rate_limits`, found through pgbench's search_path.
table_options = {"logged": ("bench_logged", ["logged", "70"]),
                 "unlogged": ("bench_unlogged", ["unlogged", "70"]),
                 "fillfactor 100": ("bench_ff100", ["logged", "100"])}


def table(option):
    return f"{table_options[option][0]}.bench_rate_limits"


def run(*command, env=None, **kwargs):
    merged = dict(os.environ, **(env or {}))
    return subprocess.run(command, check=True, capture_output=True, text=True, env=merged, **kwargs).stdout


def sql(statement):
    return run(psql_path, url, "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-c", statement).strip()


def swift(*arguments):
    # A store cell whose decision waits past the store's timeout (a busy machine) ends with that
    # error: the cell runs once more, and the retry is reported.
    try:
        return run(binary, *arguments).split()
    except subprocess.CalledProcessError as error:
        print(f"retrying {' '.join(arguments)}: {(error.stderr or '').splitlines()[:1]}", file=sys.stderr)
        return run(binary, *arguments).split()


def wal_split(start, end):
    """Bytes of WAL records without and with their full-page images between two LSNs, read by
    pg_waldump from the cluster's pg_wal (None when it cannot be read)."""
    wal = os.path.join(sql("SHOW data_directory"), "pg_wal")
    try:
        out = run(waldump_path, "--stats", "-p", wal, "-s", start, "-e", end)
    except (subprocess.CalledProcessError, OSError):
        return None
    total = next(line for line in out.splitlines() if line.startswith("Total")).split()
    # Total N record_size [%] fpi_size [%] combined [100%]
    return int(total[2]), int(total[4])


def set_mode(mode):
    """The throwaway settings, or the durable ones (as production runs), for the cells that follow."""
    value = "on" if mode == "durable" else "off"
    for setting in ["fsync", "synchronous_commit", "full_page_writes"]:
        sql(f"ALTER SYSTEM SET {setting} = {value}")
    sql("SELECT pg_reload_conf()")
    time.sleep(0.2)
    sql("CHECKPOINT")


with open(frozen) as file:
    statement = file.read()
scripts = {}
for keys, choose in [("hot", "\\set k 0"), ("random", "\\set k random(1, 100000)")]:
    path = os.path.join(work, f"{keys}.sql")
    with open(path, "w") as file:
        # pgbench's variables are numbers: the statement builds the key from one, as the executable's keys are.
        file.write(f"{choose}\n{statement}")
    scripts[keys] = path


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p))] if values else 0


def pgbench(callers, keys, option="logged"):
    prefix = os.path.join(work, f"log-{callers}-{keys}")
    for old in os.listdir(work):
        if old.startswith(os.path.basename(prefix) + "."):
            os.remove(os.path.join(work, old))
    run(
        pgbench_path, "-n", "-M", "prepared", "-f", scripts[keys], "-c", str(callers), "-j", str(min(callers, 2)),
        "-T", str(max(1, int(seconds))), "-D", f"inc={increment}", "-D", f"tol={tolerance}",
        "-D", f"budget={budget}", "-D", f"lt={budget // 1000}ms", "-l", "--log-prefix", prefix, url,
        cwd=work, env={"PGOPTIONS": f"-c search_path={table_options[option][0]}"})
    latencies = []
    for name in os.listdir(work):
        if name.startswith(os.path.basename(prefix) + "."):
            with open(os.path.join(work, name)) as log:
                latencies += [int(line.split()[2]) / 1000 for line in log if line.strip()]
    return len(latencies) / max(1, int(seconds)), percentile(latencies, 0.5), percentile(latencies, 0.99)


def store(callers, keys, option="logged"):
    return tuple(map(float, swift("store", str(callers), keys, str(seconds), table(option))))


def naive(callers, keys, option="logged"):
    return tuple(map(float, swift("naive", str(callers), keys, str(seconds), table(option))))


def driver(callers, keys, option="logged"):
    return tuple(map(float, swift("driver", str(callers), keys, str(seconds), table(option))))


ticks = os.sysconf("SC_CLK_TCK")


def process_cpu(pid, children=False):
    """Seconds of CPU (user and system) that process `pid` used, and its reaped children with
    `children`; 0 for a process that is gone."""
    try:
        with open(f"/proc/{pid}/stat") as file:
            fields = file.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # After the name: state is field 3, utime 14, stime 15, cutime 16, cstime 17 (1-based).
    used = int(fields[11]) + int(fields[12]) + ((int(fields[13]) + int(fields[14])) if children else 0)
    return used / ticks


def cluster_processes():
    """The postmaster's pid and those of the processes it started."""
    with open(os.path.join(data_directory, "postmaster.pid")) as file:
        postmaster = int(file.readline())
    children = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as file:
                    parent = int(file.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            if parent == postmaster:
                children.append(entry)
    return postmaster, children


def database_cpu(settle_to=None):
    """Seconds of CPU the cluster used so far: the postmaster with the backends it reaped, and
    every live process it started (a backend that exits moves from the second sum to the first).
    With `settle_to`, waits (up to 3 s) until no more than that many processes are left: the
    cell's backends have exited and been reaped, so that none is read halfway."""
    postmaster, children = cluster_processes()
    deadline = time.monotonic() + 3
    while settle_to is not None and len(children) > settle_to and time.monotonic() < deadline:
        time.sleep(0.05)
        postmaster, children = cluster_processes()
    return process_cpu(postmaster, children=True) + sum(process_cpu(child) for child in children)


def client_cpu():
    """Seconds of CPU used by this script's finished children: the cell's client, whoever it is."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def stop(process):
    if process.poll() is None:
        process.terminate()
        process.wait()


redis = None
if shutil.which("redis-server") and shutil.which("redis-benchmark"):
    # A free port of its own, so that another run's server is never measured (or stopped) instead.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    redis = subprocess.Popen(["redis-server", "--port", port, "--bind", "127.0.0.1", "--save", "",
                              "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Stopped however the run ends, a failed cell included.
    atexit.register(stop, redis)
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


def redis_cell(callers, keys, option=None):
    key = "key-0" if keys == "hot" else "key-__rand_int__"
    requests = str(int(seconds * 30_000))  # the cell's decisions, which its CPU is divided by
    out = run("redis-benchmark", "-p", port, "-c", str(callers), "-n", requests, "-r", "100000", "--csv",
              "EVALSHA", sha, "1", key, str(increment), str(tolerance))
    fields = [field.strip('"') for field in out.strip().splitlines()[-1].split(",")]
    return float(fields[1]), float(fields[4]), float(fields[6])


data_directory = sql("SHOW data_directory")
for option, (schema, words) in table_options.items():
    sql(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    swift("setup", table(option), *words)
print(f"== {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
      f"{' '.join(open('/proc/loadavg').read().split()[:3])}, {os.cpu_count()} cores, "
      f"{sql('SELECT version()').split(' on ')[0]}", file=sys.stderr)

# The load part measures the first three; the driver runs the frozen statement, as pgbench does.
systems = {"pgbench -M prepared (frozen)": pgbench, "PostgresRateLimitStore": store, "naive transaction": naive,
           "PostgresNIO alone (same statement)": driver}
if redis:
    systems["Redis 7 GCRA (Lua)"] = redis_cell
modes = [mode for mode in ["throwaway", "durable"] if mode in parts or (mode == "throwaway" and "throughput" in parts)]
results = {}
if "throughput" in parts or "durable" in parts:
    for round in range(rounds):
        for mode in modes:
            set_mode(mode)
            for callers in caller_counts:
                for keys in ["hot", "random"]:
                    for system, cell in systems.items():
                        if mode == "durable" and system.startswith("Redis"):
                            continue
                        # What the cell cost: its client's CPU, and the server's (the cluster's, or Redis's).
                        redis_cell_runs = system.startswith("Redis")
                        processes = len(cluster_processes()[1])
                        server_cpu = (lambda: process_cpu(redis.pid)) if redis_cell_runs else (
                            lambda: database_cpu(settle_to=processes))
                        before = (client_cpu(), server_cpu())
                        figures = cell(callers, keys)
                        # pgbench runs whole seconds; redis-benchmark a number of requests; the others `seconds`.
                        decisions = (figures[0] * max(1, int(seconds)) if system.startswith("pgbench")
                                     else int(seconds * 30_000) if system.startswith("Redis") else figures[0] * seconds)
                        costs = ((client_cpu() - before[0]) * 1e6 / decisions, (server_cpu() - before[1]) * 1e6 / decisions)
                        results.setdefault((mode, callers, keys, system), []).append(tuple(figures[:3]) + costs)
                        print(f"round {round + 1}, {mode}: {callers:2} callers, {keys:6}, {system}: "
                              f"{figures[0]:,.0f}/s", file=sys.stderr)
    for mode in modes:
        print(f"\nDecisions, {mode} settings, medians of {rounds} interleaved rounds of {seconds:g} s per cell:\n")
        print("CPU per decision: the client's (the process that sends the decisions: the store's executable, "
              "pgbench, redis-benchmark) and the server's (every process of the PostgreSQL cluster, or "
              "redis-server), in µs, from /proc and getrusage.\n")
        print("| callers | keys | who decides | decisions/s | p50 (ms) | p99 (ms) | x pgbench | x Redis "
              "| client CPU µs | server CPU µs |")
        print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for callers in caller_counts:
            for keys in ["hot", "random"]:
                def median_rate(system):
                    cells = results.get((mode, callers, keys, system))
                    return statistics.median(figures[0] for figures in cells) if cells else None
                reference, redis_rate = median_rate(next(iter(systems))), median_rate("Redis 7 GCRA (Lua)")
                for system in systems:
                    cells = results.get((mode, callers, keys, system))
                    if not cells:
                        continue
                    rate, p50, p99, client, server = (
                        statistics.median(figures[i] for figures in cells) for i in range(5))
                    label = "hot key" if keys == "hot" else "random of 100k"
                    versus_redis = f"{rate / redis_rate:.2f}x" if redis_rate else "-"
                    print(f"| {callers} | {label} | {system} | {rate:,.0f} | {p50:.3f} | {p99:.3f} | "
                          f"{rate / reference:.2f}x | {versus_redis} | {client:.1f} | {server:.1f} |")

if "load" in parts:
    # What each decision costs the primary: every cell starts from reset statistics and a checkpoint.
    set_mode("durable")
    load_results = {}
    for round in range(rounds):
        for option in table_options:
            for system, cell in list(systems.items())[:3]:
                schema = table_options[option][0]
                sql("CHECKPOINT")
                sql("SELECT pg_stat_reset(), pg_stat_reset_shared('wal')")
                start = sql("SELECT pg_current_wal_insert_lsn()")
                figures = cell(16, "random", option)
                decisions = figures[0] * seconds
                # The cell's connections have closed, which sends their statistics: wait until they are in.
                query = ("SELECT n_tup_upd, n_tup_hot_upd, n_dead_tup, "
                         "pg_total_relation_size(relid) FROM pg_stat_user_tables "
                         f"WHERE schemaname = '{schema}' AND relname = 'bench_rate_limits'")
                previous, stats = None, None
                for _ in range(50):
                    time.sleep(0.2)
                    stats = sql(query)
                    if stats == previous:
                        break
                    previous = stats
                updates, hot, dead, size = map(int, stats.split("|"))
                wal = [int(value) for value in sql("SELECT wal_bytes, wal_records, wal_fpi FROM pg_stat_wal").split("|")]
                records, images = wal_split(start, sql("SELECT pg_current_wal_insert_lsn()")) or (0, 0)
                load_results.setdefault((option, system), []).append(
                    (figures[0], wal[0] / decisions, wal[1] / decisions, records / decisions, images / decisions,
                     updates / decisions, hot / max(updates, 1), dead, dead / decisions, size))
                print(f"round {round + 1}, load: {option}, {system}: {figures[0]:,.0f}/s, "
                      f"{wal[0] / decisions:,.0f} WAL bytes per decision", file=sys.stderr)
    print(f"\nWhat a decision costs the primary, 16 callers on random keys of 100k, durable settings, "
          f"a CHECKPOINT before each cell, medians of {rounds} rounds of {seconds:g} s:\n")
    print("Per decision: WAL bytes (pg_stat_wal), WAL records, and the WAL's bytes split by pg_waldump into "
          "records and full-page images (the images are paid once per page after each checkpoint, so a "
          "longer run between checkpoints pays less of them per decision); rows updated, the share of "
          "updates that were HOT, dead tuples left at the end (pg_stat_user_tables), and the table's size "
          "with its index.\n")
    print("| table | who decides | decisions/s | WAL bytes | WAL records | records' bytes | full-page images' "
          "bytes | updates | HOT | dead tuples left (per decision) | table + index |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (option, system), cells in load_results.items():
        m = [statistics.median(figures[i] for figures in cells) for i in range(10)]
        print(f"| {option} | {system} | {m[0]:,.0f} | {m[1]:,.0f} | {m[2]:.2f} | {m[3]:,.0f} | {m[4]:,.0f} | "
              f"{m[5]:.2f} | {m[6] * 100:.0f} % | {m[7]:,.0f} ({m[8]:.3f}) | {m[9] / 1e6:.1f} MB |")
    set_mode("throwaway")

if "purge" in parts:
    for option in ["logged"]:
        swift("setup", table(option) + "_purge")
        cells = [tuple(map(float, swift("purge", table(option) + "_purge", "100000"))) for _ in range(rounds)]
        by_rows, by_pages = (statistics.median(cell[i] for cell in cells) for i in range(2))
        print(f"\nPurging 100,000 expired rows of 200,000 (logged, throwaway settings), medians of {rounds}:\n")
        print("| purge | seconds |")
        print("|---|---:|")
        print(f"| purgeExpired() in batches of 1,000 rows, until one comes back short | {by_rows:.3f} |")
        print(f"| purgeAllExpired(), 256 pages per statement | {by_pages:.3f} |")

if "denied" in parts:
    print("\nA hot key already denied (1 permit per hour), answered by the denial cache:\n")
    print("| callers | decisions/s | round trips/s |")
    print("|---:|---:|---:|")
    for callers in [1, 16]:
        rate, trips = swift("denied", str(callers), str(seconds), table("logged"))
        print(f"| {callers} | {float(rate):,.0f} | {float(trips):.1f} |")

if redis:
    stop(redis)

if "middleware" in parts and server and shutil.which("wrk"):
    # The middleware when most requests are denied (1 request per minute for the one API key),
    # over the PostgreSQL store and in memory, interleaved.
    flags = ["--permits", "1", "--per", "60", "--api-key", "bench", "--log-level", "error"]
    servers = [subprocess.Popen([server, "--port", "8093"] + flags, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
               subprocess.Popen([server, "--port", "8094", "--postgres", url] + flags,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    for process in servers:
        atexit.register(stop, process)
    time.sleep(3)
    middleware = {}
    for round in range(rounds):
        for port, name in [("8093", "in memory"), ("8094", "PostgreSQL store")]:
            out = run("wrk", "-t2", "-c16", f"-d{int(seconds)}s", "--latency", "-H", "X-API-Key: bench",
                      f"http://127.0.0.1:{port}/")
            rate = float(next(line.split()[1] for line in out.splitlines() if line.startswith("Requests/sec")))
            middleware.setdefault(name, []).append(rate)
    for process in servers:
        stop(process)
    print("\nThe middleware when most requests are denied (wrk -t2 -c16, one API key allowed 1 per minute):\n")
    print("| server | requests/s | x in memory |")
    print("|---|---:|---:|")
    memory = statistics.median(middleware["in memory"])
    for name, rates in middleware.items():
        print(f"| {name} | {statistics.median(rates):,.0f} | {statistics.median(rates) / memory:.2f}x |")
print(f"\n== done {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average "
      f"{' '.join(open('/proc/loadavg').read().split()[:3])}", file=sys.stderr)
shutil.rmtree(work)
