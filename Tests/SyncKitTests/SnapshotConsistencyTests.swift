import Foundation
import Testing
import TestSupport
import KVStore
import SyncKit

/// Snapshots taken while another process commits: each one is exactly one committed state.
@Suite struct SnapshotConsistencyTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.ledger"

    /// What a snapshot of the writer's collections holds.
    struct LedgerState: Equatable, CustomStringConvertible {
        var transaction: Int
        var count: Int
        var sum: Int
        var extras: Int
        var description: String { "txn \(transaction): count \(count), sum \(sum), extras \(extras)" }
    }

    /// Reads a snapshot file and checks the writer's invariants inside it.
    func state(ofSnapshot path: String) throws -> LedgerState {
        let store = try Store(copyFile: path)
        let ledger = try store.collection("ledger", key: Int.self, value: Int.self)
        let meta = try store.collection("ledgerMeta", key: String.self, value: Int.self)
        let extraNames = try store.catalog().map(\.name).filter { $0.hasPrefix("extra-") }
        let extraCollections = try extraNames.map { try store.collection($0, key: Int.self, value: Int.self) }
        return try store.read { tx in
            let entries = try ledger.entries(in: tx)
            let state = LedgerState(transaction: try meta.get("txn", in: tx) ?? -1,
                                    count: try meta.get("count", in: tx) ?? -1,
                                    sum: try meta.get("sum", in: tx) ?? -1,
                                    extras: try meta.get("extras", in: tx) ?? 0)
            // The invariants the writer keeps in every transaction.
            #expect(entries.count == state.count, "\(path): \(state)")
            #expect(entries.reduce(0) { $0 + $1.value } == state.sum, "\(path): \(state)")
            for (name, collection) in zip(extraNames, extraCollections) {
                let k = Int(name.dropFirst("extra-".count))!
                #expect(try collection.count(in: tx) == (k <= state.extras ? 1 : 0), "\(path): \(name), \(state)")
            }
            #expect(extraNames.count >= state.extras)
            return state
        }
    }

    @Test(.blockingWork) func everySnapshotIsOneCommittedStateAndSourceTransactionsNeverDecrease() throws {
        let container = try dir.container(group)
        let snapshots = try Snapshots(container: container)
        let stop = dir.path + "/stop"
        let writer = try BackgroundProcess.helper(["invariant-writer", dir.path, group, stop])
        #expect(writer.waitForLine { $0 == "ready" } != nil)

        var exported: [SnapshotEntry] = []
        // Twelve snapshots, and the writer far enough along (its transaction IDs, as the store shows
        // them) to have committed more than 20 states: on a loaded disk each durable commit can take
        // seconds, so wait for the commits themselves rather than count them after the exports.
        let meta = try container.store.collection("ledgerMeta", key: String.self, value: Int.self)
        func writerTransaction() throws -> Int { try container.store.read { try meta.get("txn", in: $0) } ?? 0 }
        let firstTransaction = try writerTransaction()
        let deadline = Date(timeIntervalSinceNow: BuildScale.seconds(180))
        while try exported.count < 12 || writerTransaction() - firstTransaction < 30, Date() < deadline {
            if exported.count < 12 {
                exported.append(try snapshots.export(from: container.store))
            } else {
                Thread.sleep(forTimeInterval: 0.05)
            }
        }
        #expect(FileManager.default.createFile(atPath: stop, contents: nil))
        let (status, lines, stderr) = writer.wait()
        #expect(status == 0, "\(stderr)")

        // The writer's log: every committed state, by transaction ID.
        let committed = lines.dropFirst().map { line -> LedgerState in
            let f = line.split(separator: " ").map { Int($0)! }
            return LedgerState(transaction: f[0], count: f[1], sum: f[2], extras: f[3])
        }
        #expect(committed.count > 20)
        #expect(zip(committed, committed.dropFirst()).allSatisfy { $0.transaction < $1.transaction })

        #expect(exported.count == 12)
        #expect(zip(exported, exported.dropFirst()).allSatisfy { $0.sourceTransactionID <= $1.sourceTransactionID })
        var distinct = Set<Int>()
        for entry in exported {
            let state = try state(ofSnapshot: snapshots.path(of: entry))
            // The last state the writer committed at or before the snapshot's source transaction.
            let expected = try #require(committed.last { $0.transaction <= entry.sourceTransactionID })
            #expect(state == expected, "\(entry.file), source txn \(entry.sourceTransactionID)")
            distinct.insert(state.transaction)
        }
        print("12 snapshots of \(distinct.count) distinct committed states among \(committed.count) commits; extras up to \(committed.last?.extras ?? 0)")
        #expect(distinct.count >= 2)
        #expect(try snapshots.verify().isValid)
    }
}
