#!/usr/bin/env python3
"""Fails when a suite that needs PostgreSQL, the sync gateway or Chromium ran fewer tests than its floor.

Those suites compile to nothing without their package trait (`#if PostgreSQL`, `#if Serve`) or skip
without their program, so a build that lost a trait, or a machine that lost a program, would pass
`make test` with them silently gone. `make test` writes its results as xUnit
(`.build/test-results/make-test-swift-testing.xml` for Swift Testing, `make-test.xml` for XCTest);
this counts the test cases that ran (neither failed nor skipped) under each floor's prefix of
`Target.Suite` and compares them with `.ci/test-floors`.

Usage: scripts/check-test-floors.py FLOORS RESULTS.xml [RESULTS.xml ...]   (exit 0: every floor met)
       scripts/check-test-floors.py --self-test
"""
import os
import sys
import tempfile
import xml.etree.ElementTree as ET


def read_floors(path):
    floors = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            if len(parts) != 2 or not parts[1].isdigit():
                raise SystemExit(f"check-test-floors: {path}:{number}: expected 'Target.Suite MINIMUM', got {line!r}")
            floors.append((parts[0], int(parts[1])))
    return floors


def passed_cases(paths):
    names = []
    for path in paths:
        if not os.path.exists(path):
            continue
        for case in ET.parse(path).getroot().iter("testcase"):
            if any(child.tag in ("failure", "error", "skipped") for child in case):
                continue
            names.append(case.get("classname", "") + "." + case.get("name", ""))
    return names


def check(floors, names):
    problems = []
    for prefix, minimum in floors:
        ran = sum(1 for name in names if name == prefix or name.startswith(prefix + "."))
        line = f"{prefix}: {ran} passed (floor {minimum})"
        if ran < minimum:
            problems.append(line)
        else:
            print(f"check-test-floors: {line}")
    return problems


def self_test():
    with tempfile.TemporaryDirectory() as directory:
        results = os.path.join(directory, "r.xml")
        with open(results, "w") as handle:
            handle.write('<testsuites><testsuite>'
                         '<testcase classname="A.Gateway" name="one()"/><testcase classname="A.Gateway" name="two()"/>'
                         '<testcase classname="A.Gateway" name="skipped()"><skipped/></testcase>'
                         '<testcase classname="A.GatewayOther" name="x()"/></testsuite></testsuites>')
        names = passed_cases([results, os.path.join(directory, "missing.xml")])
        assert check([("A.Gateway", 2)], names) == [], "a met floor failed"
        assert len(check([("A.Gateway", 3)], names)) == 1, "a skipped case counted, or a prefix matched another suite"
        assert len(check([("B", 1)], names)) == 1, "a suite that is gone passed"
    print("check-test-floors self-test: ok")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    problems = check(read_floors(sys.argv[1]), passed_cases(sys.argv[2:]))
    for problem in problems:
        print(f"check-test-floors: {problem}: below its floor: a suite needing PostgreSQL, the gateway or Chromium did not run", file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
