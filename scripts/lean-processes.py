#!/usr/bin/env python3
"""Measures the lean processes side by side with an empty Swift program, the floor (`make lean`).

From release builds: process start to the answer of `trainer-extension` (the seed's notification
extension), of `checklist-widget` (the widget: feed and year dashboard) and of `push-extension` (the
push SDK's extension: one notification handled and written with its history, no sync request), timed
by hyperfine in one run with three empty Swift programs (linked like kvtool; with the static Swift
runtime, as swiftc's `-static-stdlib` links it; and linked as the lean executables are, Package.swift's
`leanLinking`) and `kvtool --version`; their peak RSS (`VmHWM`, as each prints it, or
`/usr/bin/time`); their instructions under callgrind when valgrind is installed; and the binary sizes,
also stripped. Last, the push extension's peak RSS as `kvtool demo` printed it (with `--sync-wait 2`,
in the demo's container).

The container is seeded by `kvtool demo --root <temporary directory>`.
Usage: scripts/lean-processes.py [--runs N] [--release DIR]   (DIR: the executables to measure, by
default .build/release; to compare two builds in the same form. It must hold kvtool too, a copy, not
a link: the demo starts the lean executables it finds next to its own executable)
"""
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RELEASE = os.path.join(ROOT, ".build", "release")
GROUP = "group.com.yourcompany.VirtualTrainer"
# What Package.swift's `leanLinking` adds to swiftc's `-static-stdlib` (libstdc++ and libgcc linked statically,
# relative relocations packed, the executable's symbols not exported).
LEAN_LINKING = ["-static-stdlib", "-L" + os.path.join(ROOT, "scripts", "lean-link"), "-Xclang-linker", "-static-libgcc", "-use-ld=lld",
                "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs", "-Xlinker", "--no-export-dynamic"]
# One APNs payload for push-extension: each run records it (so the container grows by one notification
# a run, a few hundred in all).
PUSH_PAYLOAD = '{"aps":{"alert":{"title":"Lean","body":"make lean"},"sound":"default"}}'


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
    release = os.path.abspath(sys.argv[sys.argv.index("--release") + 1]) if "--release" in sys.argv else RELEASE
    for tool in ("hyperfine", "/usr/bin/time"):
        if not shutil.which(tool):
            sys.exit(f"lean-processes: {tool} is missing (scripts/install-deps.sh --perf installs it)")
    programs = {name: os.path.join(release, name) for name in ("kvtool", "trainer-extension", "checklist-widget", "push-extension")}
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
        empty_lean = os.path.join(scratch, "empty-swift-lean")
        run(["swiftc", "-O", source, "-o", empty_lean] + LEAN_LINKING)
        root = os.path.join(scratch, "root")
        demo = run([programs["kvtool"], "demo", "--root", root]).stdout
        demo_rss = re.findall(r"the extension's peak RSS ([0-9.?]+) MiB", demo)

        commands = {
            "empty Swift program (dynamic runtime, as kvtool)": [empty],
            "empty Swift program (static runtime, swiftc -static-stdlib)": [empty_static],
            "empty Swift program (linked as the lean executables: static runtime and libstdc++, RELR)": [empty_lean],
            "trainer-extension: start to the sender shown": [programs["trainer-extension"], "--root", root],
            "checklist-widget: start to the feed and the year dashboard": [programs["checklist-widget"], "--root", root],
            "push-extension: start to the notification written (no sync request)": [programs["push-extension"], "--root", root,
                                                                                    "--payload", PUSH_PAYLOAD],
            "kvtool --version": [programs["kvtool"], "--version"],
        }
        exported = os.path.join(scratch, "hyperfine.json")
        subprocess.run(["hyperfine", "-N", "--warmup", "20", "--runs", str(runs), "--export-json", exported,
                        "--style", "none"] + [shlex.join(command) for command in commands.values()],
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
        print()
        print("push-extension's peak RSS in kvtool demo (--sync-wait 2; its agent, then its live app): %s MiB"
              % (" / ".join(demo_rss) if demo_rss else "(not printed)"))


if __name__ == "__main__":
    main()
