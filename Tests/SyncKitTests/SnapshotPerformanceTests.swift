import Foundation
import Testing
import TestSupport
import KVStore
import SyncKit
import Workloads

/// The snapshot export of the one-year checklist dataset, timed and printed (never asserted: the
/// figure depends on the machine and the build); what was exported is asserted.
@Suite(.serialized) struct SnapshotPerformanceTests {
    let dir = TemporaryDirectory()

    static var buildMode: String {
        #if DEBUG
        "debug"
        #else
        "release"
        #endif
    }

    static func milliseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) * 1e3 + Double(attoseconds) / 1e15
    }

    @Test func exportingTheOneYearDataset() throws {
        let container = try dir.container("group.com.shibu.checklist")
        let checklist = try ChecklistStore(store: container.store)
        let records = ChecklistDataset.records()
        for record in records { try checklist.records.put(record, forKey: record.day) }  // one save per day, as the app does
        let snapshots = try Snapshots(container: container)
        let info = try container.store.environmentInfo()

        let clock = ContinuousClock()
        var timings: [Double] = []
        var entries: [SnapshotEntry] = []
        for _ in 0..<5 {
            let start = clock.now
            entries.append(try snapshots.export(from: container.store))
            timings.append(Self.milliseconds(clock.now - start))
        }
        let sorted = timings.sorted()
        let entry = entries[0]
        // The parts: the compacted copy alone, and the SHA-256 of the file alone.
        var start = clock.now
        let copied = try container.store.copy(toNewFile: dir.path + "/plain-copy.mdb")
        let copyTime = Self.milliseconds(clock.now - start)
        start = clock.now
        let (digest, _) = try SHA256.hash(fileAt: snapshots.path(of: entry))
        let hashTime = Self.milliseconds(clock.now - start)
        #expect(copied.size == entry.size && SHA256.hex(digest) == entry.sha256)
        print("""
            snapshot export, one-year checklist dataset (\(Self.buildMode) build, \(ProcessInfo.processInfo.activeProcessorCount) cores):
              store in use      \(info.usedPages * info.pageSize) bytes (\(info.usedPages) pages of \(info.pageSize))
              snapshot          \(entry.size) bytes, sha256 \(entry.sha256.prefix(16))…
              parts             copy \(String(format: "%.1f", copyTime)) ms, SHA-256 \(String(format: "%.1f", hashTime)) ms
              export time       best \(String(format: "%.1f", sorted[0])) ms, median \(String(format: "%.1f", sorted[2])) ms, worst \(String(format: "%.1f", sorted[4])) ms (5 runs: copy + fsync + SHA-256 + manifest)
            """)

        // What was exported: every record and summary, in a compacted file smaller than the store.
        #expect(Set(entries.map(\.sha256)).count == 1)  // same state, same bytes
        let snapshot = try snapshots.open(generation: entry.generation, verifying: true)
        let copy = try ChecklistStore(store: snapshot)
        let (count, summaries, scores) = try snapshot.read { tx in
            (try copy.records.count(in: tx), try copy.summaries.count(in: tx),
             try copy.records.entries(in: tx).reduce(0) { $0 + $1.value.cachedInputCount })
        }
        #expect(count == 343 && summaries == 343 && scores == 9288)
        #expect(entry.size <= info.usedPages * info.pageSize)
        #expect(entry.size < 10 << 20)  // the seed's storage budget for a year of data
    }
}
