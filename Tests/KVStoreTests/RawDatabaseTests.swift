import Foundation
import Testing
import TestSupport
import KVStore

/// The byte-level API tools build on: named databases, raw puts that are or are not recorded, and
/// databases created inside a write transaction.
@Suite struct RawDatabaseTests {
    let dir = TemporaryDirectory()

    /// Records what each commit changed.
    final class Recorder: WriteObserver, @unchecked Sendable {
        var commits: [[Mutation]] = []
        func transactionDidCommit(_ commit: CommittedTransaction) { commits.append(commit.mutations) }
    }

    @Test func namesStatsScansAndPutsThatAreRecordedOnlyWhenAsked() throws {
        let store = try dir.store()
        let scores = try store.collection("scores", key: String.self, value: Int.self)
        try scores.put(1, forKey: "a")
        #expect(try store.databaseNames().contains("c/scores"))
        #expect(try store.databaseNames().contains("_catalog"))
        let raw = try #require(try store.rawDatabase(named: "c/scores"))
        #expect(try store.rawDatabase(named: "c/absent") == nil)
        #expect(throws: KVStoreError.self) { try store.rawDatabase(named: "") }

        let recorder = Recorder()
        store.addObserver(recorder)
        try store.write { tx in
            try tx.rawPut(raw, "b".encodedKey, try CBOREncoder().encode(2), recordingAs: .collection("scores"))
            try tx.rawPut(raw, "c".encodedKey, try CBOREncoder().encode(3))
            #expect(try tx.rawDelete(raw, "a".encodedKey, recordingAs: .collection("scores")))
            #expect(try tx.rawDelete(raw, "zzz".encodedKey) == false)
            #expect(throws: KVStoreError.self) { try tx.rawPut(raw, [], [1]) }
        }
        #expect(recorder.commits == [[Mutation(target: .collection("scores"), key: "b".encodedKey, operation: .put),
                                      Mutation(target: .collection("scores"), key: "a".encodedKey, operation: .delete)]])
        #expect(try scores.entries().map(\.key) == ["b", "c"])
        let stat = try store.read { try $0.rawStat(raw) }
        #expect(stat.entries == 2 && stat.flags == 0 && stat.depth == 1)
        var seen: [[UInt8]] = []
        try store.read { tx in try tx.rawScan(raw, reverse: true) { key, _ in seen.append(Array(key)); return true } }
        #expect(seen == ["c".encodedKey, "b".encodedKey])
        try store.write { try $0.rawClear(raw) }
        #expect(try scores.count() == 0)
    }

    @Test func aDatabaseCreatedInsideAWriteExistsOnlyIfTheWriteCommits() throws {
        let store = try dir.store()
        struct Abort: Error {}
        #expect(throws: Abort.self) {
            try store.write { tx in
                let fresh = try #require(try tx.rawDatabase(named: "x/fresh", create: true))
                try tx.rawPut(fresh, [1], [2])
                throw Abort()
            }
        }
        #expect(try !store.databaseNames().contains("x/fresh"))
        #expect(try store.rawDatabase(named: "x/fresh") == nil)

        try store.write { tx in
            #expect(try tx.rawDatabase(named: "x/fresh", create: false) == nil)
            let fresh = try #require(try tx.rawDatabase(named: "x/fresh", create: true))
            try tx.rawPut(fresh, [1], [2])
        }
        // The handle is shared once the write committed: other transactions read through it.
        let fresh = try #require(try store.rawDatabase(named: "x/fresh"))
        #expect(try store.read { try $0.rawGet(fresh, [1]) } == [2])
        let other = try Store(directory: store.directory)
        #expect(try other.read { try $0.rawGet(fresh, [1]) } == [2])
    }
}
