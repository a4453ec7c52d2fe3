import Foundation

/// The year on disk, each store compacted, written to `benchmarks/.build/sizes.txt` (package-benchmark
/// shows no output of ours; `make bench` prints the file). Each fixture adds its own figure when it is
/// built, so the line is complete once both have been built (as in every full run).
enum DiskSizes {
    private static let directory = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent(".build")

    /// Records `bytes` for `implementation` ("kvstore" or "sqlite") and rewrites sizes.txt from every
    /// figure recorded so far.
    static func record(_ implementation: String, bytes: Int) throws {
        let parts = directory.appendingPathComponent("sizes")
        try FileManager.default.createDirectory(at: parts, withIntermediateDirectories: true)
        try Data("\(bytes)".utf8).write(to: parts.appendingPathComponent(implementation), options: .atomic)
        func figure(_ name: String) -> String {
            (try? String(contentsOf: parts.appendingPathComponent(name), encoding: .utf8)).map { "\($0) bytes" } ?? "not measured"
        }
        let line = "one year on disk, compacted: KVStore \(figure("kvstore")) (records, summaries, history, catalog); "
            + "SQLite \(figure("sqlite")) (after VACUUM)\n"
        try Data(line.utf8).write(to: directory.appendingPathComponent("sizes.txt"), options: .atomic)
    }
}
