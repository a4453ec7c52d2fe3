#!/usr/bin/env python3
"""Counts the instructions of each benchmark workload (benchmarks/Sources/BenchmarkWorkloads) under
valgrind's callgrind and prints one table: instructions per operation, with the ratio to KVStore (above 1:
KVStore runs fewer) and to the floor (raw LMDB or the hand-written codec), where the workload has one.

    python3 scripts/instructions.py [FILTER] [--jobs N] [--scaling]

FILTER keeps the workloads whose "<workload> · <implementation>" name contains it. Each workload runs in
a process of its own (benchmarks' Instructions executable, release build): setup and a few warm-up
operations, then N operations inside `measuredLoop`, the only function callgrind counts in
(--toggle-collect). N is the workload's own (200 for microsecond-scale workloads, fewer for the
millisecond-scale ones). --scaling also runs each workload 2N times and prints both per-operation figures,
which agree when only the loop is counted. With SWIFT_DETERMINISTIC_HASHING set (dictionaries iterate in
the same order in every run), instruction counts, unlike wall-clock times, barely change
from run to run or between a busy and an idle machine; they do not show time spent waiting (fsync, a
wakeup) or in other threads. Any failed run or missing count stops the script with a non-zero exit."""
import argparse
import concurrent.futures
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(ROOT, "benchmarks")
EXECUTABLE = os.path.join(BENCHMARKS, ".build", "release", "Instructions")
OUTPUT = os.path.join(BENCHMARKS, ".build", "instructions")
RUN_TIMEOUT = 1800  # seconds for one workload under callgrind


def fail(message):
    sys.exit(f"instructions: {message}")


def build():
    command = ["swift", "build", "-c", "release", "--product", "Instructions"]
    print("$ (cd benchmarks && " + " ".join(command) + ")", file=sys.stderr, flush=True)
    try:
        subprocess.run(command, cwd=BENCHMARKS, check=True, timeout=3600)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as error:
        fail(f"building Instructions failed: {error}")


def workloads():
    """[(workload, implementation, iterations)] in the registry's order."""
    listing = subprocess.run([EXECUTABLE, "--list"], capture_output=True, text=True, timeout=60)
    if listing.returncode != 0:
        fail(f"Instructions --list failed ({listing.returncode}): {listing.stderr.strip()}")
    result = []
    for line in listing.stdout.splitlines():
        name, iterations = line.rsplit("\t", 1)
        workload, implementation = name.rsplit(" · ", 1)
        result.append((workload, implementation, int(iterations)))
    if not result:
        fail("Instructions --list printed no workloads")
    return result


def count(workload, implementation, iterations):
    """Instructions per operation: callgrind's total inside measuredLoop, divided by `iterations`."""
    slug = re.sub(r"[^A-Za-z0-9]+", "-", f"{workload}-{implementation}-{iterations}").strip("-")
    out = os.path.join(OUTPUT, slug + ".callgrind")
    if os.path.exists(out):
        os.remove(out)
    # The fixtures' stores go to a temporary directory of the run's own, removed afterwards. Hashing is
    # seeded the same in every run, so that dictionaries iterate (and the encoders sort) the same way.
    scratch = tempfile.mkdtemp(prefix="kvstore-instructions-")
    command = ["valgrind", "--tool=callgrind", "--toggle-collect=*measuredLoop*", f"--callgrind-out-file={out}",
               EXECUTABLE, workload, implementation, str(iterations)]
    try:
        run = subprocess.run(command, capture_output=True, text=True, timeout=RUN_TIMEOUT,
                             env={**os.environ, "TMPDIR": scratch, "SWIFT_DETERMINISTIC_HASHING": "1"})
    except subprocess.TimeoutExpired:
        fail(f"{workload} · {implementation}: no result after {RUN_TIMEOUT} s under callgrind")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if run.returncode != 0:
        fail(f"{workload} · {implementation} failed under callgrind ({run.returncode}):\n{run.stderr[-4000:]}")
    total = None
    try:
        with open(out) as f:
            for line in f:
                match = re.match(r"^(?:totals|summary):\s+(\d+)", line)
                if match:
                    total = int(match.group(1))
    except OSError as error:
        fail(f"{workload} · {implementation}: no callgrind output ({error})")
    if not total:
        fail(f"{workload} · {implementation}: no instructions counted in measuredLoop ({out}); "
             "did --toggle-collect match the function's symbol?")
    return total / iterations


def is_floor(implementation):
    return implementation == "raw LMDB" or implementation.startswith("floor")


def show(n):
    return f"{n / 1e6:.2f} M" if n >= 1e6 else f"{n / 1e3:.1f} k" if n >= 1e4 else f"{n:.0f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("filter", nargs="?", default="", help="substring of the workload names to run")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="runs at once")
    parser.add_argument("--scaling", action="store_true", help="also run 2N operations and compare")
    parser.add_argument("--no-build", action="store_true", help="use the Instructions executable as built")
    arguments = parser.parse_args()
    if shutil.which("valgrind") is None:
        fail("valgrind is not installed (./scripts/install-deps.sh --perf installs it)")
    if not arguments.no_build:
        build()
    os.makedirs(OUTPUT, exist_ok=True)
    selected = [w for w in workloads() if arguments.filter in f"{w[0]} · {w[1]}"]
    if not selected:
        fail(f"no workload name contains {arguments.filter!r}")

    runs = [(w, i) for w in selected for i in ([w[2], 2 * w[2]] if arguments.scaling else [w[2]])]
    started = time.monotonic()
    counts = {}
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=max(1, arguments.jobs))
    try:
        futures = {pool.submit(count, w[0], w[1], n): (w, n) for w, n in runs}
        for future in concurrent.futures.as_completed(futures):
            (workload, implementation, _), n = futures[future]
            counts[(workload, implementation, n)] = future.result()
            print(f"  {workload} · {implementation} × {n}: {show(counts[(workload, implementation, n)])} instructions/op",
                  file=sys.stderr, flush=True)
    finally:
        # On a failure, the runs not started yet are dropped (the ones under way finish first).
        pool.shutdown(cancel_futures=True)

    # One block per workload: KVStore first, then the others, the floor last.
    order = {}
    for workload, implementation, _ in selected:
        order.setdefault(workload, []).append(implementation)
    header = ("WORKLOAD", "IMPLEMENTATION", "INSTRUCTIONS/OP", "× KVSTORE", "× FLOOR")
    if arguments.scaling:
        header += ("×2 ITERATIONS", "DRIFT")
    rows = [header]
    iterations = {(w, i): n for w, i, n in selected}
    for workload in sorted(order):
        implementations = sorted(order[workload], key=lambda i: (not i.startswith("KVStore"), is_floor(i), i))
        per_op = {i: counts[(workload, i, iterations[(workload, i)])] for i in implementations}
        ours = per_op["KVStore"] if "KVStore" in per_op else next((per_op[i] for i in implementations if i.startswith("KVStore")), None)
        floor = next((per_op[i] for i in implementations if is_floor(i)), None)
        for implementation in implementations:
            n = per_op[implementation]
            row = (workload, implementation, show(n),
                   "" if implementation.startswith("KVStore") or ours is None else f"{n / ours:.2f}",
                   "" if is_floor(implementation) or floor is None else f"{n / floor:.2f}")
            if arguments.scaling:
                doubled = counts[(workload, implementation, 2 * iterations[(workload, implementation)])]
                row += (show(doubled), f"{(doubled - n) / n * 100:+.2f}%")
            rows.append(row)
    widths = [max(len(r[c]) for r in rows) for c in range(len(header))]
    for r in rows:
        print("  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip())
    print(f"({len(runs)} runs under callgrind in {time.monotonic() - started:.0f} s; outputs in {os.path.relpath(OUTPUT, ROOT)})")


if __name__ == "__main__":
    main()
