#!/usr/bin/env python3
"""Fails when an import in Sources/ crosses a layer.

The layers, each allowed to import only those below it:

    Codecs <- KVStore (which re-exports it: CBOR, the JSON projection, hex, base64; Codecs imports none of ours)
    CLMDB <- KVStore <- SyncKit <- Workloads <- kvtool
                        SyncKit <- SyncKitPostgres <- SyncGateway <- kvtool
                        KVStore <- SyncWire <- SyncKitPostgres, SyncGateway (the gateway's wire and request parsing)
                           HTTPServerKit <- SyncKitPostgres, SyncGateway, kvtool
                        SyncKitPostgres <- PostgresTesting <- kvtool (a throwaway cluster: tests, demo)

and the lean executables (TrainerExtension, ChecklistWidget, over LeanProcess) import only KVStore,
SyncKit and Workloads. Codecs may be imported by every layer above KVStore (it is below them all). Only SyncKitPostgres, SyncGateway (the sync gateway's server) and HTTPServerKit
(what the gateway, its client and `kvtool serve` share of HTTP) import NIO or postgres-nio, and kvtool's Serve/ folder
(`kvtool serve`'s HTTP server) SwiftNIO's own modules: no library an app links depends on NIO. The lean targets (Codecs, KVStore, SyncKit, Workloads, LeanProcess and the lean
executables) never import the whole Foundation, nor FoundationNetworking, FoundationXML,
FoundationInternationalization or ArgumentParser: they use FoundationEssentials, and `import Foundation`
may appear only in the `#else` branch of `#if canImport(FoundationEssentials)` (for platforms without it); only KVStore imports CLMDB, and only in its LMDB/ folder: the C library is sealed there (its files
import it `internal`ly, so that no public API shows LMDB's C types). Modules that are not the
project's own (Foundation, Glibc, ArgumentParser, Logging…) are not this check's business.

Usage: scripts/check-imports.py [ROOT]   (exit 0: clean; exit 1: one line per crossing import)
       scripts/check-imports.py --self-test
"""
import os
import re
import sys
import tempfile

LAYERS = ["CLMDB", "Codecs", "KVStore", "SyncKit", "Workloads", "SyncWire", "HTTPServerKit", "SyncKitPostgres", "PostgresTesting", "SyncGateway", "kvtool"]
# SwiftNIO's and postgres-nio's modules: SyncKitPostgres and SyncGateway alone may import them.
NIO_TARGETS = {"SyncKitPostgres", "SyncGateway", "HTTPServerKit"}
NIO = re.compile(r"^(NIO\w*|PostgresNIO|_ConnectionPoolModule)$")
# What each target of Sources/ may import of the project's own modules.
ALLOWED = {
    "Codecs": set(),
    "KVStore": {"CLMDB", "Codecs"},
    "SyncKit": {"KVStore", "Codecs"},
    "Workloads": {"KVStore", "Codecs", "SyncKit"},
    "SyncWire": {"KVStore", "Codecs"},
    "SyncKitPostgres": {"KVStore", "Codecs", "SyncKit", "SyncWire", "HTTPServerKit"},
    "HTTPServerKit": set(),
    "PostgresTesting": {"KVStore", "SyncKitPostgres"},
    "SyncGateway": {"KVStore", "Codecs", "SyncWire", "SyncKitPostgres", "HTTPServerKit"},
    "kvtool": {"KVStore", "Codecs", "SyncKit", "Workloads", "SyncKitPostgres", "SyncGateway", "HTTPServerKit", "PostgresTesting"},
    "LeanProcess": set(),
    "TrainerExtension": {"LeanProcess", "KVStore", "SyncKit", "Workloads"},
    "ChecklistWidget": {"LeanProcess", "KVStore", "SyncKit", "Workloads"},
    "PushExtension": {"LeanProcess", "KVStore", "SyncKit", "Workloads"},
}
LEAN_EXECUTABLES = {"LeanProcess", "TrainerExtension", "ChecklistWidget", "PushExtension"}
PROJECT = set(LAYERS) | LEAN_EXECUTABLES | {"TestSupport", "FuzzProperties", "SyncFuzzProperties"}
# What the processes with a memory budget (an extension, a widget) must not link.
LEAN = {"Codecs", "KVStore", "SyncKit", "Workloads", "SyncWire"} | LEAN_EXECUTABLES
HEAVY = {"Foundation", "FoundationNetworking", "FoundationXML", "FoundationInternationalization", "ArgumentParser"}
IMPORT = re.compile(
    r"^\s*(?:@\w+(?:\([^)]*\))?\s+)*(?:(public|package|internal|fileprivate|private)\s+)?import\s+"
    r"(?:(?:typealias|struct|class|enum|protocol|let|var|func)\s+)?([A-Za-z_][A-Za-z0-9_]*)")


def violations(root):
    found = []
    sources = os.path.join(root, "Sources")
    for target in sorted(os.listdir(sources)):
        directory = os.path.join(sources, target)
        if not os.path.isdir(directory) or target == "CLMDB":
            continue
        allowed = ALLOWED.get(target)
        for folder, _, files in os.walk(directory):
            for name in sorted(files):
                if not name.endswith(".swift"):
                    continue
                path = os.path.join(folder, name)
                with open(path, encoding="utf-8") as handle:
                    # Where we are in `#if canImport(FoundationEssentials) … #else … #endif`.
                    essentials = None
                    for number, line in enumerate(handle, 1):
                        directive = line.strip()
                        if directive.startswith("#if canImport(FoundationEssentials)"):
                            essentials = "if"
                        elif directive.startswith("#else") and essentials == "if":
                            essentials = "else"
                        elif directive.startswith("#endif") and essentials is not None:
                            essentials = None
                        match = IMPORT.match(line)
                        if not match:
                            continue
                        access, module = match.group(1), match.group(2)
                        where = f"{os.path.relpath(path, root)}:{number}"
                        if target in LEAN and module in HEAVY and not (module == "Foundation" and essentials == "else"):
                            found.append(f"{where}: {target} imports {module}; the lean targets use FoundationEssentials "
                                         "(import Foundation only in the #else of #if canImport(FoundationEssentials))")
                        if allowed is None:
                            if module in PROJECT:
                                found.append(f"{where}: {target} is not a known layer ({' <- '.join(LAYERS)}); it imports {module}")
                            continue
                        serve_folder = target == "kvtool" and (os.sep + "Serve" + os.sep) in path and module.startswith("NIO")
                        if NIO.match(module) and target not in NIO_TARGETS and not serve_folder:
                            found.append(f"{where}: {target} imports {module}; only SyncKitPostgres and SyncGateway (and kvtool's Serve/ folder, "
                                         "SwiftNIO's modules) may depend on NIO")
                        if module in PROJECT and module not in allowed:
                            found.append(f"{where}: {target} imports {module}, which is not below it ({' <- '.join(LAYERS)}; only KVStore imports CLMDB)")
                        if target == "KVStore" and module == "CLMDB":
                            if access not in ("internal", "fileprivate", "private"):
                                found.append(f"{where}: KVStore must import CLMDB `internal import CLMDB`, so that no public API shows LMDB's C types")
                            if os.sep + "LMDB" + os.sep not in os.path.relpath(path, directory).join([os.sep, ""]):
                                found.append(f"{where}: only KVStore's LMDB/ folder imports CLMDB (LMDB calls live there alone)")
    return found


def self_test():
    with tempfile.TemporaryDirectory() as root:
        def write(relative, text):
            path = os.path.join(root, relative)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
        write("Sources/KVStore/LMDB/A.swift", "internal import CLMDB\n#if canImport(FoundationEssentials)\n"
              "import FoundationEssentials\n#else\nimport Foundation\n#endif\n")
        write("Sources/kvtool/K.swift", "import Foundation\nimport ArgumentParser\nimport Workloads\n")
        write("Sources/TrainerExtension/main.swift", "import LeanProcess\nimport Workloads\n")
        write("Sources/SyncKit/B.swift", "import KVStore\n")
        write("Sources/KVStore/Exports.swift", "@_exported import Codecs\n")
        write("Sources/Codecs/CBOR/R.swift", "#if canImport(FoundationEssentials)\nimport FoundationEssentials\n#else\nimport Foundation\n#endif\n")
        assert violations(root) == [], violations(root)
        write("Sources/SyncKit/C.swift", "import CLMDB\n")
        write("Sources/KVStore/D.swift", "@testable import SyncKit\n")
        write("Sources/KVStore/LMDB/E.swift", "import CLMDB\n")
        write("Sources/KVStore/Store/G.swift", "internal import CLMDB\n")
        write("Sources/Workloads/F.swift", "public import kvtool\n")
        write("Sources/SyncKit/H.swift", "import NIOCore\n")
        write("Sources/kvtool/Commands/N.swift", "import NIOPosix\n")
        write("Sources/kvtool/Serve/S.swift", "import NIOPosix\nimport PostgresNIO\n")
        write("Sources/SyncKitPostgres/I.swift", "import PostgresNIO\nimport SyncKit\n")
        write("Sources/Workloads/J.swift", "import Foundation\n")
        write("Sources/Codecs/JSON/K.swift", "import KVStore\nimport Foundation\n")
        write("Sources/ChecklistWidget/main.swift", "import ArgumentParser\nimport kvtool\n")
        found = violations(root)
        assert len(found) == 13, found
        assert any("K.swift:1: Codecs imports KVStore" in line for line in found), found
        assert any("K.swift:2: Codecs imports Foundation" in line for line in found), found
        assert any("Workloads imports Foundation; the lean targets" in line for line in found), found
        assert any("ChecklistWidget imports ArgumentParser" in line for line in found), found
        assert any("ChecklistWidget imports kvtool" in line for line in found), found
        assert any("SyncKit imports NIOCore" in line for line in found), found
        assert any("N.swift:1: kvtool imports NIOPosix" in line for line in found), found
        assert any("S.swift:2: kvtool imports PostgresNIO" in line for line in found), found
        assert not any("S.swift:1:" in line for line in found), found
        assert any("only KVStore's LMDB/ folder" in line for line in found), found
        assert any("SyncKit imports CLMDB" in line for line in found), found
        assert any("KVStore imports SyncKit" in line for line in found), found
        assert any("internal import CLMDB" in line for line in found), found
        assert any("Workloads imports kvtool" in line for line in found), found
    print("check-imports self-test: ok (a clean tree passes; 13 planted crossings are all reported)")


if __name__ == "__main__":
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        sys.exit(0)
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems = violations(root)
    for problem in problems:
        print(f"check-imports: {problem}", file=sys.stderr)
    if problems:
        sys.exit(1)
    print("check-imports: every import in Sources/ respects Codecs, CLMDB <- KVStore <- SyncKit <- Workloads | SyncKitPostgres <- SyncGateway <- kvtool (with HTTPServerKit and PostgresTesting), "
          "and the lean targets link FoundationEssentials, not Foundation")
