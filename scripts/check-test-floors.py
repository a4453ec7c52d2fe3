#!/usr/bin/env python3
"""Fails when a suite that needs PostgreSQL, the sync gateway or Chromium ran fewer tests than its floor.

Those suites compile to nothing without their package trait (`#if PostgreSQL`, `#if Serve`) or skip
without their program, so a build that lost a trait, or a machine that lost a program, would pass
`make test` with them silently gone. `make test` writes its results as xUnit
(`.build/test-results/make-test-swift-testing.xml` for Swift Testing, `make-test.xml` for XCTest);
this counts the test cases that ran (neither failed nor skipped) under each floor's prefix of
`Target.Suite` and compares them with `.ci/test-floors`.

The floors cannot lag the suites: `--sources TESTS FLOORS` (run by .ci/run before `make test`, in
well under a second) counts the `@Test` functions of every suite in the sources and fails when a
floor is not exactly its suite's count (a parameterized test counts once, as in the xUnit output; a
test with an `.enabled(if:)` or `.disabled` trait is not counted, since `make test` may skip it), when
a floor names a suite that has no tests, or when a suite under `#if PostgreSQL` or `#if Serve` has no
floor line.

Usage: scripts/check-test-floors.py FLOORS RESULTS.xml [RESULTS.xml ...]   (exit 0: every floor met)
       scripts/check-test-floors.py --sources TESTS FLOORS                (exit 0: floors = sources)
       scripts/check-test-floors.py --self-test
"""
import os
import re
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


TOP_LEVEL = re.compile(r"^(?:@\w+(?:\([^)]*\))?\s+)*(?:(?:public|package|internal|private|fileprivate|final)\s+)*"
                       r"(?:struct|class|enum|actor|extension)\s+(\w+)")
TEST = re.compile(r"^\s+@Test\b(.*)")
GATE = re.compile(r"^#if\s+(PostgreSQL|Serve)\b")


def source_suites(tests_dir):
    """`Target.Suite` -> [tests make test runs, conditional tests, gated]: every `@Test` of the files
    under `tests_dir/Target/`, under the top-level type or extension it sits in (declarations start
    in column 0, tests are indented); gated when its file starts with `#if PostgreSQL` or `#if Serve`."""
    suites = {}
    for root, _, files in sorted(os.walk(tests_dir)):
        for file in sorted(files):
            if not file.endswith(".swift"):
                continue
            path = os.path.join(root, file)
            target = os.path.relpath(path, tests_dir).split(os.sep)[0]
            gated, suite = False, None
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    if GATE.match(line) and suite is None:
                        gated = True
                    declared = TOP_LEVEL.match(line)
                    if declared:
                        suite = declared.group(1)
                        continue
                    test = TEST.match(line)
                    if test and suite:
                        counts = suites.setdefault(f"{target}.{suite}", [0, 0, False])
                        conditional = ".enabled(if" in test.group(1) or ".disabled" in test.group(1)
                        counts[1 if conditional else 0] += 1
                        counts[2] = counts[2] or gated
    return suites


def check_sources(floors, suites):
    problems = []
    for prefix, minimum in floors:
        matched = [counts for name, counts in suites.items() if name == prefix or name.startswith(prefix + ".")]
        if not matched:
            problems.append(f"{prefix}: the floor names a suite (or target) with no @Test in the sources")
            continue
        runs, conditional = sum(c[0] for c in matched), sum(c[1] for c in matched)
        note = f" (and {conditional} that may skip)" if conditional else ""
        if minimum != runs:
            problems.append(f"{prefix}: floor {minimum}, but the sources have {runs} tests that make test runs{note}: set the floor to {runs}")
    for name, (runs, _, gated) in sorted(suites.items()):
        covered = any(name == prefix or name.startswith(prefix + ".") for prefix, _ in floors)
        if gated and runs and not covered:
            problems.append(f"{name}: {runs} tests under #if PostgreSQL or #if Serve, but no floor line: add '{name} {runs}'")
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
        os.makedirs(os.path.join(directory, "T", "Sub"))
        with open(os.path.join(directory, "T", "Sub", "G.swift"), "w") as handle:
            handle.write('#if PostgreSQL\nimport Testing\n/// @Test in a comment\n@Suite(.serialized) struct G {\n'
                         '    @Test func one() {}\n    @Test(arguments: [1, 2]) func two(n: Int) {}\n'
                         '    @Test(.enabled(if: false)) func long() {}\n}\nextension G {\n    @Test func three() {}\n}\n'
                         'struct Helper {}\n#endif\n')
        with open(os.path.join(directory, "T", "Plain.swift"), "w") as handle:
            handle.write('import Testing\nstruct P {\n    @Test func p() {}\n}\n')
        suites = source_suites(directory)
        assert suites == {"T.G": [3, 1, True], "T.P": [1, 0, False]}, f"miscounted: {suites}"
        assert check_sources([("T.G", 3)], suites) == [], "a floor equal to its suite's count failed"
        assert check_sources([("T", 4)], suites) == [], "a target's floor is not the sum of its suites"
        assert len(check_sources([("T.G", 2)], suites)) == 1, "a floor below the sources' count passed"
        assert len(check_sources([("T.G", 4)], suites)) == 1, "a floor above the sources' count passed"
        assert len(check_sources([("T.G", 3), ("T.Gone", 1)], suites)) == 1, "a floor of a suite that is gone passed"
        assert len(check_sources([("T.P", 1)], suites)) == 1, "a gated suite without a floor passed"
    print("check-test-floors self-test: ok")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return
    if len(sys.argv) == 4 and sys.argv[1] == "--sources":
        floors = read_floors(sys.argv[3])
        problems = check_sources(floors, source_suites(sys.argv[2]))
        for problem in problems:
            print(f"check-test-floors: {sys.argv[3]}: {problem}", file=sys.stderr)
        if not problems:
            print(f"check-test-floors: the {len(floors)} floors of {sys.argv[3]} are the counts of their suites in {sys.argv[2]}")
        sys.exit(1 if problems else 0)
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    problems = check(read_floors(sys.argv[1]), passed_cases(sys.argv[2:]))
    for problem in problems:
        print(f"check-test-floors: {problem}: below its floor: a suite needing PostgreSQL, the gateway or Chromium did not run", file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
