import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The fault and stress scenarios of issue 6, one file per scenario, each with real processes on a
/// real LMDB environment. They run one at a time (their timings and throughputs would disturb each
/// other), short by default and long with `KVSTORE_STRESS=1` (`make stress`). Each prints its
/// figures on lines starting with `[reliability]`.
@Suite(.serialized) struct ReliabilityTests {}

/// Prints one figure line of a scenario.
func report(_ scenario: String, _ text: String) {
    print("[reliability] \(scenario) (\(StressLevel.name), \(BuildScale.name)): \(text)")
}

/// The built `kvtool`.
var kvtool: String { productsDirectory() + "/kvtool" }

/// Whether a background process ended by exiting with status 0 (not by a signal such as SIGBUS).
/// `false` while it runs.
func exitedCleanly(_ process: BackgroundProcess) -> Bool {
    !process.process.isRunning && process.process.terminationReason == .exit && process.process.terminationStatus == 0
}

/// Milliseconds since `start` (a ``monotonicNow()`` reading).
func milliseconds(since start: UInt64) -> Double { Double(monotonicNow() - start) / 1e6 }

/// `%.1f`.
func fixed(_ value: Double, _ digits: Int = 1) -> String { String(format: "%.\(digits)f", value) }

/// Whether the tests run in CI (`CI` set to `1` or `true`), where a test that cannot inject its fault
/// fails instead of skipping.
var isCI: Bool {
    ["1", "true"].contains(ProcessInfo.processInfo.environment["CI"]?.lowercased() ?? "")
}

/// Creates `path` (an empty file), as the helpers' stop signals.
func touch(_ path: String) {
    _ = FileManager.default.createFile(atPath: path, contents: nil)
}

/// The map size recorded in the environment's meta page, as `mdb_stat -e` reads it (a process that
/// opens with no size of its own gets exactly that).
func recordedMapSize(_ storeDirectory: String) throws -> Int? {
    let result = try run("/usr/bin/mdb_stat", ["-e", storeDirectory])
    guard result.status == 0 else { return nil }
    for line in result.stdout.split(separator: "\n") where line.contains("Map size:") {
        return Int(line.split(separator: ":").last!.trimmingCharacters(in: .whitespaces))
    }
    return nil
}

/// The pages in use (`mdb_stat -e`'s "Number of pages used").
func usedPages(_ storeDirectory: String) throws -> Int? {
    let result = try run("/usr/bin/mdb_stat", ["-e", storeDirectory])
    guard result.status == 0 else { return nil }
    for line in result.stdout.split(separator: "\n") where line.contains("Number of pages used:") {
        return Int(line.split(separator: ":").last!.trimmingCharacters(in: .whitespaces))
    }
    return nil
}

/// The names of the publishers' temporary files (`.kvtmp-<target>-<pid>-<hex>`) below `directory`.
func temporaryFiles(under directory: String) -> [String] {
    ((try? FileManager.default.subpathsOfDirectory(atPath: directory)) ?? []).filter { $0.contains(".kvtmp-") }.sorted()
}
