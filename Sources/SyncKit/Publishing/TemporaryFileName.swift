import Foundation
import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// The names of the temporary files that snapshot and feed publishers write before renaming them into
/// place, `.<target>.tmp-<pid>-<16 hex digits>`, and the sweeping of the ones a crashed publisher left.
///
/// ```swift
/// TemporaryFileName.make(for: "snapshot-000007.mdb")  // ".snapshot-000007.mdb.tmp-4242-9f0c…"
/// TemporaryFileName.parse(".today.feed.tmp-4242-9f0c1d2e3f405162")  // ("today.feed", 4242)
/// ```
///
/// The process ID in the name is what lets a sweeper tell a file still being written (its process is
/// alive) from an orphan (its process is gone). Process IDs are reused, so files older than a limit
/// are removed whatever their process; keep the limit far above the time one publication takes.
enum TemporaryFileName {
    static let marker = ".tmp-"

    /// A fresh temporary name for `target`, carrying this process's ID.
    static func make(for target: String, pid: Int32 = getpid()) -> String {
        let random = UInt64.random(in: 0 ... .max)
        let digits = String(random, radix: 16)
        return "." + target + marker + String(pid) + "-" + String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// The target and process ID encoded in a temporary name, or `nil` if `name` is not one.
    static func parse(_ name: String) -> (target: String, pid: Int32)? {
        guard name.hasPrefix("."), let range = name.range(of: marker, options: .backwards) else { return nil }
        let target = String(name[name.index(after: name.startIndex)..<range.lowerBound])
        let tail = name[range.upperBound...].split(separator: "-", omittingEmptySubsequences: false)
        guard !target.isEmpty, tail.count == 2, let pid = Int32(tail[0]), pid > 0,
              tail[1].count == 16, tail[1].allSatisfy(\.isHexDigit) else { return nil }
        return (target, pid)
    }

    /// Whether a process with this ID exists (`kill(pid, 0)`: `EPERM` still means it exists).
    static func isProcessAlive(_ pid: Int32) -> Bool {
        if kill(pid, 0) == 0 { return true }
        return errno == EPERM
    }

    /// Removes the temporary files in `directory` (relative to `files`) whose target satisfies
    /// `matching` and that are orphans: their process is gone, or they are older than `maxAge`
    /// seconds, or `everyOwner` is set (the caller holds the lock every writer of them holds, so none
    /// can be in progress). Returns the relative paths removed. Files that vanish meanwhile are skipped.
    static func removeOrphans(
        in files: SharedFiles, directory: String, olderThan maxAge: TimeInterval, everyOwner: Bool = false,
        matching: (String) -> Bool
    ) throws -> [String] {
        let cutoff = Date(timeIntervalSinceNow: -max(0, maxAge))
        var removed: [String] = []
        for entry in try files.entries(in: directory) where entry.kind == .file {
            guard let (target, pid) = parse(entry.name), matching(target) else { continue }
            guard everyOwner || entry.modificationDate < cutoff || !isProcessAlive(pid) else { continue }
            do {
                try files.remove(entry.path)
                removed.append(entry.path)
            } catch KVStoreError.fileNotFound {
                continue  // another sweeper was faster
            }
        }
        return removed
    }
}
