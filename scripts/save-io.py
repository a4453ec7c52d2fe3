#!/usr/bin/env python3
"""What a durable save reaches the disk with, and what it costs, side by side (`make bench`).

For each implementation of "Save one DailyRecord, durable" (benchmarks' Instructions executable, release
build): one process of 200 saves under `strace -f`, whose last 150 commits give, per commit, the data
pages written (LMDB writes each dirty page once: the pages the commit dirtied), the write calls they took
(one per run of adjacent pages), the bytes, the fdatasyncs and every system call; how many commits grew
the data file. Then the wall clock: `Instructions --interleave`, which runs one save of each implementation
in turn (so that whatever else the machine does falls on all of them alike), RUNS times (default 3); the
medians of the runs' p50s and their ratios to raw LMDB.

    python3 scripts/save-io.py [--runs N] [--rounds N] [--no-strace] [--executable PATH]

--executable measures another build's Instructions (say, a worktree of the commit before a change).
"""
import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXECUTABLE = os.path.join(ROOT, "benchmarks", ".build", "release", "Instructions")
WORKLOAD = "Save one DailyRecord, durable"
# The three "raw LMDB + history …" rows are designs of history in plain LMDB (benchmarks'
# RawLMDB+HistoryModels.swift): the floor each design sets, beside the raw put. "raw LMDB" stays last.
IMPLEMENTATIONS = ["KVStore", "KVStore without notification", "KVStore without history", "GRDB", "raw LMDB + history B-tree",
                   "raw LMDB + history tail", "raw LMDB + history in the main DB", "raw LMDB"]


def io_counts(implementation, scratch):
    """Per commit (the last 150 of 200): data pages, write calls, bytes, fdatasyncs, system calls."""
    trace = os.path.join(scratch, "trace.txt")
    subprocess.run(["strace", "-f", "-o", trace, EXECUTABLE, WORKLOAD, implementation, "200"],
                   check=True, capture_output=True, timeout=600)
    lines = open(trace).read().splitlines()
    # Commits end at their fdatasync (LMDB) or fsync/fdatasync (SQLite); every system call in between
    # belongs to the commit that follows the previous one.
    commits, current, position = [], {"writes": [], "calls": 0}, {}
    for line in lines:
        call = re.match(r"\d+ +(\w+)\(", line)
        if not call:
            continue
        current["calls"] += 1
        name = call.group(1)
        if name in ("fdatasync", "fsync"):
            current["syncs"] = current.get("syncs", 0) + 1
            commits.append(current)
            current = {"writes": [], "calls": 0}
            continue
        if name == "lseek":
            m = re.search(r"lseek\((\d+), (\d+),", line)
            if m:
                position[m.group(1)] = int(m.group(2))
        elif name == "pwrite64":
            m = re.search(r"pwrite64\((\d+), .*, (\d+), (\d+)\) = (\d+)", line)
            if m:
                current["writes"].append((m.group(1), int(m.group(3)), int(m.group(4))))
        elif name in ("writev", "write"):
            m = re.search(r"(?:writev|write)\((\d+), .* = (\d+)$", line)
            if m:
                fd = m.group(1)
                current["writes"].append((fd, position.get(fd, 0), int(m.group(2))))
                position[fd] = position.get(fd, 0) + int(m.group(2))
    steady = commits[-150:]
    if len(steady) < 150:
        raise SystemExit(f"save-io: {implementation}: only {len(commits)} syncs in the trace")
    page_writes = [w for c in steady for w in c["writes"] if w[2] >= 4096]
    data_fd = statistics.mode([w[0] for w in page_writes]) if page_writes else None
    high = 0
    for c in commits[:-150]:
        for fd, offset, size in c["writes"]:
            if fd == data_fd:
                high = max(high, offset + size)
    grew = 0
    for c in steady:
        end = max([offset + size for fd, offset, size in c["writes"] if fd == data_fd] or [0])
        if end > high:
            grew += 1
            high = end
    n = len(steady)
    return {
        "pages": sum(size // 4096 for c in steady for fd, _, size in c["writes"] if fd == data_fd and size >= 4096) / n,
        "writes": sum(1 for c in steady for w in c["writes"] if w[0] == data_fd and w[2] >= 4096) / n,
        "bytes": sum(size for c in steady for _, _, size in c["writes"]) / n,
        "write calls": sum(len(c["writes"]) for c in steady) / n,
        "syncs": sum(c.get("syncs", 0) for c in steady) / n,
        "calls": sum(c["calls"] for c in steady) / n,
        "grew": grew,
    }


def interleaved(rounds):
    result = subprocess.run([EXECUTABLE, "--interleave", WORKLOAD, str(rounds)] + IMPLEMENTATIONS,
                            check=True, capture_output=True, text=True, timeout=1800)
    p50 = {}
    for line in result.stdout.splitlines():
        m = re.match(r"  (.+): p50 (\d+) µs, p90 (\d+) µs", line)
        if m:
            p50[m.group(1)] = int(m.group(2))
    return p50


def main():
    global EXECUTABLE
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--no-strace", action="store_true")
    parser.add_argument("--executable", default=EXECUTABLE)
    arguments = parser.parse_args()
    EXECUTABLE = arguments.executable
    if not os.path.exists(EXECUTABLE):
        raise SystemExit(f"save-io: build it first: cd benchmarks && swift build -c release --product Instructions")
    if not arguments.no_strace:
        if not shutil.which("strace"):
            raise SystemExit("save-io: strace is missing (scripts/install-deps.sh --perf installs it)")
        print(f"{WORKLOAD}: what one commit writes (strace of 200 saves, the last 150; a store holding the year)")
        print(f"{'IMPLEMENTATION':<36}{'DATA PAGES':>11}{'IN WRITES':>10}{'BYTES':>9}{'SYNCS':>7}{'SYSCALLS':>10}  FILE GREW")
        with tempfile.TemporaryDirectory() as scratch:
            for implementation in IMPLEMENTATIONS:
                c = io_counts(implementation, scratch)
                print(f"{implementation:<36}{c['pages']:>11.1f}{c['writes']:>10.1f}{c['bytes']:>9.0f}{c['syncs']:>7.1f}{c['calls']:>10.1f}  {c['grew']} of 150 commits")
        print("(DATA PAGES: 4 KiB pages written to the data file, LMDB's dirty pages; GRDB's are WAL frames. SYNCS: fsync/fdatasync;"
              " LMDB also writes its meta page through an O_DSYNC descriptor, a second flush, in every durable commit.)")
    runs = [interleaved(arguments.rounds) for _ in range(arguments.runs)]
    print(f"{WORKLOAD}: wall clock, {arguments.runs} runs of {arguments.rounds} rounds interleaved (p50 of each run; the median of the runs)")
    floor = statistics.median(r["raw LMDB"] for r in runs)
    for implementation in IMPLEMENTATIONS:
        values = [r[implementation] for r in runs]
        median = statistics.median(values)
        print(f"  {implementation:<36}{median:>7.0f} µs  ({', '.join(str(v) for v in values)})  {median / floor:.2f}× raw LMDB")


if __name__ == "__main__":
    main()
