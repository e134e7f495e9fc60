#!/usr/bin/env python3
"""The rate-limit middleware in memory beside a bare route, on Hummingbird and on Vapor: wrk
against the example servers' `/bare` (no middleware) and `/` (the same answer behind
`RateLimitMiddleware`), interleaved in one run, so that a busy machine slows both alike.

    python3 Scripts/middleware-benchmark.py [--seconds 5] [--rounds 3] [--connections 16] [--no-build]

Builds the example servers in release (`.build-example-release`), then starts four: on each
framework, one whose limit allows every request (2,000,000,000 per year: the middleware's own
cost, no 429) and one that allows one request a year (every request after the first answered
429 by the middleware, the route never runs). Each round runs every cell once, in an order that
turns from round to round. Prints the medians over the rounds and, per framework, the ratio of
each limited cell to the bare route measured beside it in the same round (the median of the
per-round ratios). Needs wrk (`apt-get install -y wrk`).

`--postgres URL`: the limited servers decide through the PostgreSQL store on that database
(`Scripts/with-postgres.sh` gives one in `$PACE_POSTGRES_URL`) instead of in memory, so that every
allowed request is a decision in the database.

To compare two versions of the middleware in one run, copy the two executables of a release
build aside (`.build-example-release/release/pace-example-server*`) and pass that folder as
`--baseline`: its servers run beside this build's, in the same rounds.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
package = os.path.join(root, "Examples", "PaceExampleServer")
scratch = os.path.join(root, ".build-example-release")

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--seconds", type=int, default=5, help="each wrk cell's duration")
parser.add_argument("--rounds", type=int, default=3)
parser.add_argument("--connections", type=int, default=16)
parser.add_argument("--threads", type=int, default=1, help="wrk's threads")
parser.add_argument("--no-build", action="store_true", help="use the binaries already built")
parser.add_argument("--port", type=int, default=18180, help="the first of the servers' ports")
parser.add_argument("--postgres", metavar="URL", help="decide through the PostgreSQL store on this database")
parser.add_argument(
    "--baseline", metavar="DIR",
    help="a folder with another build's pace-example-server and pace-example-server-vapor (a copy of an "
    "earlier release build), measured in the same rounds as this build's")
arguments = parser.parse_args()

if not arguments.no_build:
    subprocess.run(
        ["swift", "build", "-c", "release", "--package-path", package, "--scratch-path", scratch], check=True)
binaries = os.path.join(scratch, "release")

# Logging at warning: neither framework writes a line per request then, so the figures are the
# servers' and the middleware's, not the terminal's.
common = ["--host", "127.0.0.1", "--log-level", "warning"] + (
    ["--postgres", arguments.postgres] if arguments.postgres else [])
# A year: the key stays in the limiter with its bucket never full again, as a busy key does, rather
# than going idle (and being forgotten, its timer armed and fired) between two requests.
allowing = ["--permits", "2000000000", "--per", str(86_400 * 365)]
if arguments.postgres:
    # The store counts a burst's whole period in 64-bit microseconds (2,000,000,000 years' worth
    # is refused): 100,000,000 a day, more than any run sends.
    allowing = ["--permits", "100000000", "--per", "86400"]
denying = ["--permits", "1", "--per", str(86_400 * 365)]
frameworks = [("Hummingbird", "pace-example-server"), ("Vapor", "pace-example-server-vapor")]
builds = [("", binaries)] + ([("baseline ", arguments.baseline)] if arguments.baseline else [])

servers = {}
api_keys = {}
processes = []
port = arguments.port
for build, folder in builds:
    for framework, executable in frameworks:
        for limit, flags in [("allowing", allowing), ("denying", denying)]:
            command = [os.path.join(folder, executable), "--port", str(port)] + common + flags
            base = f"http://127.0.0.1:{port}"
            if arguments.postgres:
                # The servers share the store's table: each counts under an API key of its own, or
                # the denying server's grant (a year ahead) would deny the allowing one's requests.
                api_keys[base] = f"server-{port}"
                command += ["--api-key", api_keys[base]]
            processes.append(subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            servers[(build + framework, limit)] = base
            port += 1
# Each framework of each build is one row.
rows = [build + framework for build, _ in builds for framework, _ in frameworks]


def stop_servers():
    for process in processes:
        process.terminate()
    for process in processes:
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def wait_until_up(base):
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(base + "/bare", timeout=2) as response:
                response.read()
                return
        except (urllib.error.URLError, ConnectionError, OSError):
            if time.monotonic() > deadline:
                raise SystemExit(f"no server answered at {base}")
            time.sleep(0.2)


def wrk(url, api_key=None):
    """Requests per second, and how many of the responses were not 2xx or 3xx."""
    output = subprocess.run(
        ["wrk", f"-t{arguments.threads}", f"-c{arguments.connections}", f"-d{arguments.seconds}s", url]
        + (["-H", f"X-API-Key: {api_key}"] if api_key else []),
        check=True, capture_output=True, text=True).stdout
    rate = float(re.search(r"Requests/sec:\s+([0-9.]+)", output).group(1))
    refused = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    total = int(re.search(r"(\d+) requests in", output).group(1))
    return rate, (int(refused.group(1)) if refused else 0), total


# The cells: the bare route, the route behind the middleware that allows it, and behind the one
# that denies it (its first request allowed, every other one 429).
cells = [
    (framework, case, servers[(framework, limit)] + path, api_keys.get(servers[(framework, limit)]))
    for framework in rows
    for case, limit, path in [("bare", "allowing", "/bare"), ("allowed", "allowing", "/"), ("denied", "denying", "/")]
]

try:
    for base in servers.values():
        wait_until_up(base)
    load_before = os.getloadavg()
    rates = {(framework, case): [] for framework, case, _, _ in cells}
    ratios = {(framework, case): [] for framework, case, _, _ in cells if case != "bare"}
    for round_index in range(arguments.rounds):
        # The order turns each round, so that no cell always runs first or after the same one.
        shift = round_index % len(cells)
        measured = {}
        for framework, case, url, api_key in cells[shift:] + cells[:shift]:
            rate, refused, total = wrk(url, api_key)
            if case == "allowed" and refused:
                raise SystemExit(f"{framework}: {refused} requests were not allowed: raise the limit")
            if case == "denied" and refused < total - 1:
                raise SystemExit(f"{framework}: only {refused} of {total} requests were denied")
            measured[(framework, case)] = rate
            rates[(framework, case)].append(rate)
            print(f"round {round_index + 1}: {framework:20} {case:8} {rate:10,.0f}/s", file=sys.stderr)
        for framework, case in ratios:
            ratios[(framework, case)].append(measured[(framework, case)] / measured[(framework, "bare")])
    load_after = os.getloadavg()
finally:
    stop_servers()

print(
    f"\nwrk -t{arguments.threads} -c{arguments.connections} -d{arguments.seconds}s, {arguments.rounds} rounds "
    f"interleaved; medians. Load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; "
    f"{os.cpu_count()} cores; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; limits "
    f"{'through the PostgreSQL store' if arguments.postgres else 'in memory'}.\n")
print("| framework | bare route | middleware, allowed | x bare | middleware, denied (429) | x bare |")
print("|---|---|---|---|---|---|")
for framework in rows:
    bare = statistics.median(rates[(framework, "bare")])
    allowed = statistics.median(rates[(framework, "allowed")])
    denied = statistics.median(rates[(framework, "denied")])
    print(
        f"| {framework} | {bare:,.0f}/s | {allowed:,.0f}/s | **{statistics.median(ratios[(framework, 'allowed')]):.2f}x** "
        f"| {denied:,.0f}/s | {statistics.median(ratios[(framework, 'denied')]):.2f}x |")
