#!/usr/bin/env python3
"""Measures the lean processes side by side with an empty Swift program, the floor (`make lean`).

From release builds: process start to the answer of `trainer-extension` (the seed's notification
extension) and of `checklist-widget` (the widget: feed and year dashboard), timed by hyperfine in one
run with two empty Swift programs (linked like kvtool, and with the static Swift runtime like the lean
executables) and `kvtool --version`; their peak RSS (`VmHWM`, as each prints it, or `/usr/bin/time`);
their instructions under callgrind when valgrind is installed; and the binary sizes, also stripped.

The container is seeded by `kvtool demo --root <temporary directory>`.
Usage: scripts/lean-processes.py [--runs N]
"""
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASE = os.path.join(ROOT, ".build", "release")
GROUP = "group.com.yourcompany.VirtualTrainer"


def run(arguments, **kwargs):
    return subprocess.run(arguments, check=True, capture_output=True, text=True, timeout=600, **kwargs)


def peak_rss_mib(command):
    """The peak RSS of one run: the VmHWM line the lean executables print, else /usr/bin/time's %M."""
    result = subprocess.run(["/usr/bin/time", "-f", "TIME-MAXRSS %M"] + command, capture_output=True, text=True, timeout=60)
    printed = re.search(r"max RSS ([0-9.]+) MiB", result.stdout)
    if printed:
        return float(printed.group(1))
    measured = re.search(r"TIME-MAXRSS (\d+)", result.stderr)
    return int(measured.group(1)) / 1024 if measured else float("nan")


def instructions(command):
    """Instructions of one run under callgrind, of a stripped copy (valgrind cannot read the debug
    information of some Swift binaries, kvtool's among them)."""
    if not shutil.which("valgrind"):
        return None
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "callgrind.out")
        stripped = os.path.join(scratch, os.path.basename(command[0]))
        subprocess.run(["strip", "-o", stripped, command[0]], check=True)
        result = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, stripped] + command[1:],
                                capture_output=True, text=True, timeout=300)
        match = re.search(r"Collected : (\d+)", result.stderr)
        return int(match.group(1)) if match else None


def size_mib(path, scratch):
    stripped = os.path.join(scratch, os.path.basename(path) + ".stripped")
    subprocess.run(["strip", "-o", stripped, path], check=True)
    return os.path.getsize(path) / 1048576, os.path.getsize(stripped) / 1048576


def main():
    runs = int(sys.argv[sys.argv.index("--runs") + 1]) if "--runs" in sys.argv else 300
    for tool in ("hyperfine", "/usr/bin/time"):
        if not shutil.which(tool):
            sys.exit(f"lean-processes: {tool} is missing (scripts/install-deps.sh --perf installs it)")
    programs = {name: os.path.join(RELEASE, name) for name in ("kvtool", "trainer-extension", "checklist-widget")}
    for name, path in programs.items():
        if not os.access(path, os.X_OK):
            sys.exit(f"lean-processes: {path} is missing; build it with: swift build -c release --product {name}")
    with tempfile.TemporaryDirectory(prefix="kvstore-lean-") as scratch:
        source = os.path.join(scratch, "empty.swift")
        with open(source, "w") as handle:
            handle.write('print("hello")\n')
        empty = os.path.join(scratch, "empty-swift")
        empty_static = os.path.join(scratch, "empty-swift-static")
        run(["swiftc", "-O", source, "-o", empty])
        run(["swiftc", "-O", "-static-stdlib", source, "-o", empty_static])
        root = os.path.join(scratch, "root")
        run([programs["kvtool"], "demo", "--root", root])

        commands = {
            "empty Swift program (dynamic runtime, as kvtool)": [empty],
            "empty Swift program (static runtime, as the lean executables)": [empty_static],
            "trainer-extension: start to the sender shown": [programs["trainer-extension"], "--root", root],
            "checklist-widget: start to the feed and the year dashboard": [programs["checklist-widget"], "--root", root],
            "kvtool --version": [programs["kvtool"], "--version"],
        }
        exported = os.path.join(scratch, "hyperfine.json")
        subprocess.run(["hyperfine", "-N", "--warmup", "20", "--runs", str(runs), "--export-json", exported,
                        "--style", "none"] + [" ".join(command) for command in commands.values()],
                       check=True, timeout=1800, stdout=subprocess.DEVNULL)
        with open(exported) as handle:
            timings = json.load(handle)["results"]

        print("Process start to answer, on this machine (hyperfine -N, %d runs each, one run; peak RSS of 5 runs)" % runs)
        print()
        print("| process | p50 | p90 | peak RSS | instructions |")
        print("|---|---|---|---|---|")
        for (label, command), timing in zip(commands.items(), timings):
            times = sorted(timing["times"])
            p50 = statistics.median(times) * 1000
            p90 = times[int(len(times) * 0.9)] * 1000
            rss = max(peak_rss_mib(command) for _ in range(5))
            counted = instructions(command)
            counted_text = "%.2fM" % (counted / 1e6) if counted else "(no valgrind)"
            print("| %s | %.2f ms | %.2f ms | %.1f MiB | %s |" % (label, p50, p90, rss, counted_text))
        print()
        print("| binary | size | stripped |")
        print("|---|---|---|")
        for name, path in programs.items():
            size, stripped = size_mib(path, scratch)
            print("| %s | %.1f MiB | %.1f MiB |" % (name, size, stripped))


if __name__ == "__main__":
    main()
