#!/usr/bin/env python3
"""Reads package-benchmark's markdown output (stdin) and prints one table: each workload's p50 wall
clock and malloc count per implementation, with its ratio to KVStore (above 1: KVStore is faster).
Benchmark names are "<workload> · <implementation>"."""
import re
import sys

UNITS = {"ns": 1e-3, "μs": 1.0, "us": 1.0, "ms": 1e3, "s": 1e6}
SCALE = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}

results = {}  # workload -> implementation -> {"time": µs, "mallocs": n}
name = None
for line in sys.stdin:
    heading = re.match(r"^###\s+(.*\S)\s*$", line)
    if heading:
        name = heading.group(1)
        continue
    if name is None or not line.startswith("|") or " · " not in name:
        continue
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    label, values = cells[0], cells[1:]
    if len(values) < 3:
        continue
    try:
        p50 = float(values[2].replace(",", ""))
    except ValueError:
        continue  # the header row or a separator
    workload, implementation = name.rsplit(" · ", 1)
    entry = results.setdefault(workload, {}).setdefault(implementation, {})
    time = re.match(r"Time \(wall clock\) \((\S+)\)", label)
    malloc = re.match(r"Malloc \(total\)(?: \((\S)\))?", label)
    if time:
        entry["time"] = p50 * UNITS[time.group(1)]
    elif malloc:
        entry["mallocs"] = p50 * SCALE[malloc.group(1) or ""]

def show(us):
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.2f} µs"

if not results:
    sys.exit("bench-ratios: no benchmark results in the input")
rows = [("WORKLOAD", "IMPLEMENTATION", "P50", "MALLOCS", "× KVSTORE")]
for workload in sorted(results):
    implementations = results[workload]
    # The ratios are to plain "KVStore"; variants ("KVStore day by day", "KVStore without history") are shown beside it.
    ours = implementations["KVStore"].get("time") if "KVStore" in implementations else \
        next((v.get("time") for k, v in implementations.items() if k.startswith("KVStore")), None)
    for implementation, entry in sorted(implementations.items(), key=lambda kv: (not kv[0].startswith("KVStore"), kv[0])):
        time = entry.get("time")
        ratio = "" if implementation.startswith("KVStore") or not (time and ours) else f"{time / ours:.2f}"
        rows.append((workload, implementation, show(time) if time else "?", f"{entry.get('mallocs', 0):.0f}", ratio))
widths = [max(len(r[i]) for r in rows) for i in range(5)]
for r in rows:
    print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
