#!/usr/bin/env python3
"""A shared concurrency limit across three processes, one of them killed with `kill -9`.

    Scripts/with-postgres.sh Scripts/shared-concurrency-kill.py [--lease-ms 10000] [--trials 3]

Each trial starts three instances of `pace-postgres-benchmark lease-instance` (Benchmarks/PostgreSQL,
built first) on one table, a limit of 8 on one key: first C, with 4 workers that take a permit each and hold
it for good; once C holds its 4, A and B, with 8 workers each that hold a permit for 20 ms and ask
again at once. A and B start, the script waits a second and a random part of the lease (so that the kill falls
anywhere between two renewals) and kills C with SIGKILL. A and B say when each of their works starts and ends (after the permit is
taken, before it is released), on the machine's monotonic clock.

Per trial it prints: the most works in flight at once over the three instances (C's end at the
kill: the process is gone), which the limit says is at most 8; and how long after the kill A and B
first held more than the 4 places C left them (C's first permit back) and all 8 (every one back).
The stated bound is the lease plus the longest retry delay (200 ms).
"""
import argparse
import os
import random
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "Benchmarks", "PostgreSQL")
MAXIMUM = 8
HELD_BY_C = 4


class Instance:
    """A lease-instance process whose lines are read as they come."""

    def __init__(self, binary, table, lease_ms, workers, hold_ms, seconds):
        self.process = subprocess.Popen(
            [binary, "lease-instance", table, "hot", str(MAXIMUM), str(lease_ms), str(workers), str(hold_ms),
             str(seconds)],
            stdout=subprocess.PIPE, text=True)
        self.events = []  # (nanoseconds, +1 or -1)
        self.ready = threading.Event()
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def read(self):
        for line in self.process.stdout:
            line = line.strip()
            if line == "ready":
                self.ready.set()
            elif line[:1] in "+-" and line[2:].isdigit():
                with self.lock:
                    self.events.append((int(line[2:]), 1 if line[0] == "+" else -1))

    def started(self):
        with self.lock:
            return sum(1 for _, step in self.events if step == 1)


def in_flight(events):
    """The timeline of works in flight: (nanoseconds, count after the event), ends before starts at one instant."""
    count = 0
    timeline = []
    for at, step in sorted(events, key=lambda event: (event[0], event[1])):
        count += step
        timeline.append((at, count))
    return timeline


def trial(binary, lease_ms, number):
    table = f"lease_kill_{os.getpid()}_{number}"
    victim = Instance(binary, table, lease_ms, HELD_BY_C, 10_000_000, 3600)
    deadline = time.monotonic() + 60
    while victim.started() < HELD_BY_C:
        if time.monotonic() > deadline:
            sys.exit("C did not get its permits")
        time.sleep(0.01)
    seconds = 4 + lease_ms / 1000 * 2
    others = [Instance(binary, table, lease_ms, 8, 20, seconds) for _ in range(2)]
    for instance in others:
        if not instance.ready.wait(60):
            sys.exit("an instance did not start")
    time.sleep(1 + random.uniform(0, lease_ms / 1000))
    killed_at = time.monotonic_ns()
    os.kill(victim.process.pid, signal.SIGKILL)
    victim.process.wait()
    for instance in others:
        instance.process.wait()
        instance.reader.join()
    victim.reader.join()

    # C's works ended with its process.
    c_events = [event for event in victim.events if event[0] < killed_at]
    c_events += [(killed_at, -1)] * sum(step for _, step in c_events)
    everyone = in_flight(c_events + others[0].events + others[1].events)
    most = max(count for _, count in everyone)
    survivors = in_flight(others[0].events + others[1].events)
    before = max((count for at, count in survivors if at < killed_at), default=0)
    first_back = next((at for at, count in survivors if at >= killed_at and count > MAXIMUM - HELD_BY_C), None)
    all_back = next((at for at, count in survivors if at >= killed_at and count == MAXIMUM), None)
    works = sum(1 for instance in others for _, step in instance.events if step == 1)

    def seconds_after(at):
        return "never" if at is None else f"{(at - killed_at) / 1e9:.3f} s"

    print(f"trial {number}: lease {lease_ms} ms, {works} works by A and B; at most {most} in flight "
          f"(A and B before the kill: {before}); C's first permit back after {seconds_after(first_back)}, "
          f"all 8 after {seconds_after(all_back)}", flush=True)
    return most, first_back and (first_back - killed_at) / 1e9, all_back and (all_back - killed_at) / 1e9


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lease-ms", type=int, default=10_000)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--no-build", action="store_true")
    arguments = parser.parse_args()
    if "PACE_POSTGRES_URL" not in os.environ:
        sys.exit("run it through Scripts/with-postgres.sh")
    if not arguments.no_build:
        subprocess.run(["swift", "build", "--package-path", PACKAGE, "--product", "pace-postgres-benchmark"],
                       check=True, stdout=subprocess.DEVNULL)
    binary = os.path.join(PACKAGE, ".build", "debug", "pace-postgres-benchmark")
    results = [trial(binary, arguments.lease_ms, number) for number in range(1, arguments.trials + 1)]
    bound = arguments.lease_ms / 1000 + 0.2
    first = max((first_back or float("inf")) for _, first_back, _ in results)
    every = max((all_back or float("inf")) for _, _, all_back in results)
    print(f"at most {max(most for most, _, _ in results)} in flight of a limit of {MAXIMUM}; "
          f"C's permits back within {first:.3f} s of the kill, every place held again within {every:.3f} s "
          f"(stated bound: the lease + 200 ms = {bound:.1f} s)")
    if max(most for most, _, _ in results) > MAXIMUM or first > bound:
        sys.exit(1)


if __name__ == "__main__":
    main()
