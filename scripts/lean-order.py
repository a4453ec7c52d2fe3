#!/usr/bin/env python3
"""Writes scripts/lean-link/lean.order: the functions the lean executables run, which their link puts
side by side at the start of their code (lld's --symbol-ordering-file, Package.swift's `leanLinking`).

Why (issue 46, measured on a shared 2-core machine, Linux 6.18, ext4): a process's resident set counts
the pages of its executable that are mapped, and the kernel maps a file's pages a folio at a time (up to
2 MiB when the file was read in sequentially, as a copy or `cat` leaves it) around every page the process
touches. push-extension runs 690 KiB of its 10.4 MiB of code, scattered over all of it: its code pages
alone were 7.5 MiB of its 12.4 MiB peak, and its peak 10.8 - 13.9 MiB depending on how the executable's
pages had come into the page cache. With the functions it runs placed together, it peaks at 8.3 - 9.6 MiB
whatever the page cache holds.

How: from release builds (.build/release, or --release DIR), a container seeded by `kvtool demo`, each lean
executable is run under valgrind's callgrind in the ways the demo, `make lean` and the tests run it
(the trainer's extension, the widget, the push extension with a payload it shows, one it rejects, with
--json and a sync request no owner answers, with a registered agent, and with a store it cannot open),
and the functions of the executables that ran (symbols of the executable; the C library's are not
placed) are written one per line, sorted. A function the file does not name is placed after them, as
before: run this again after a change of the code the lean executables run (`make lean` and
`LeanProcessMemoryTests` say when the push extension no longer keeps under 12 MiB).

Usage: scripts/lean-order.py [--release DIR]   (valgrind: scripts/install-deps.sh --perf)
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ORDER = os.path.join(ROOT, "scripts", "lean-link", "lean.order")
GROUP = "group.com.yourcompany.VirtualTrainer"
SHOWN = '{"aps":{"alert":{"title":"Lean","body":"make lean"},"sound":"default"}}'
REJECTED = '{"aps":{"alert":{"title":"","body":"no title"}}}'


def run(arguments, **kwargs):
    return subprocess.run(arguments, check=True, capture_output=True, text=True, timeout=600, **kwargs)


def executed(binary, arguments, scratch, environment=None):
    """The names of the functions callgrind saw run in `binary` with `arguments` (of a copy without
    debug information, which valgrind cannot read for some Swift executables; the symbols are kept)."""
    copy = os.path.join(scratch, os.path.basename(binary))
    if not os.path.exists(copy):
        run(["strip", "--strip-debug", "-o", copy, binary])
    out = os.path.join(scratch, "callgrind.out")
    subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, "--demangle=no", "--dump-instr=no", copy]
                   + arguments, capture_output=True, text=True, timeout=600, env=environment)
    names = set()
    with open(out, errors="replace") as handle:
        for line in handle:
            match = re.match(r"^c?fn=\(\d+\) (.+)$", line.rstrip("\n"))
            if match:
                names.add(match.group(1))
    os.unlink(out)
    return names


def functions(binary):
    """The function symbols `binary` defines."""
    listed = run(["nm", "--defined-only", binary]).stdout
    return {parts[2] for parts in (line.split() for line in listed.splitlines()) if len(parts) == 3 and parts[1] in "tTwW"}


def main():
    release = os.path.abspath(sys.argv[sys.argv.index("--release") + 1]) if "--release" in sys.argv else os.path.join(ROOT, ".build", "release")
    if not shutil.which("valgrind"):
        sys.exit("lean-order: valgrind is missing (scripts/install-deps.sh --perf installs it)")
    programs = {name: os.path.join(release, name) for name in ("kvtool", "trainer-extension", "checklist-widget", "push-extension")}
    for name, path in programs.items():
        if not os.access(path, os.X_OK):
            sys.exit(f"lean-order: {path} is missing; build it with: swift build -c release --product {name}")
    with tempfile.TemporaryDirectory(prefix="kvstore-lean-order-") as scratch:
        root = os.path.join(scratch, "root")
        run([programs["kvtool"], "demo", "--root", root])
        base = ["--root", root, "--group", GROUP]
        ran = set()
        ran |= executed(programs["trainer-extension"], base, scratch)
        ran |= executed(programs["trainer-extension"], base + ["--json"], scratch)
        ran |= executed(programs["checklist-widget"], base, scratch)
        ran |= executed(programs["checklist-widget"], base + ["--json"], scratch)
        push = programs["push-extension"]
        ran |= executed(push, base + ["--payload", SHOWN], scratch)
        ran |= executed(push, base + ["--payload", REJECTED], scratch)
        ran |= executed(push, base + ["--payload", SHOWN, "--json", "--sync-wait", "0.3"], scratch)
        # A registered agent, which the request starts (it fails at once: nothing listens there).
        run([programs["kvtool"], "sync", "agent", "set", "--server", "postgres://u@127.0.0.1:1/db"] + base)
        ran |= executed(push, base + ["--payload", SHOWN, "--sync-wait", "0.3"], scratch)
        run([programs["kvtool"], "sync", "agent", "clear"] + base)
        # A store it cannot open: the notification is shown from its payload.
        broken = os.path.join(scratch, "broken")
        os.makedirs(os.path.join(broken, GROUP, "Store"))
        with open(os.path.join(broken, GROUP, "Store", "data.mdb"), "wb") as handle:
            handle.write(b"\xab" * 16384)
        ran |= executed(push, ["--root", broken, "--group", GROUP, "--payload", SHOWN], scratch)
        ran |= executed(push, ["--root", os.path.join(scratch, "none"), "--group", GROUP, "--payload", SHOWN], scratch)
    defined = set()
    for name in ("trainer-extension", "checklist-widget", "push-extension"):
        defined |= functions(programs[name])
    placed = sorted(ran & defined)
    with open(ORDER, "w") as handle:
        handle.write("".join(name + "\n" for name in placed))
    print(f"lean-order: {len(placed)} functions the lean executables ran, written to {os.path.relpath(ORDER, ROOT)}; "
          "relink them (swift build -c release --product push-extension, …)")


if __name__ == "__main__":
    main()
