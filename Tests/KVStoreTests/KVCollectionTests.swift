import Foundation
import Testing
import TestSupport
@testable import KVStore
import Workloads

struct Charge: Codable, Hashable, Sendable {
    var id: UUID
    var subscriptionId: UUID
    var billedAt: Date
    var amount: Decimal
}

@Suite struct KVCollectionTests {
    let dir = TemporaryDirectory()

    /// `append` (a log's next entry) stores what `put` would: a key that sorts last is appended, and
    /// one that does not (before the last key, or equal to it) takes `put`'s path, in the same
    /// transaction, which stays usable.
    @Test func appendStoresWhatPutWouldWhereverTheKeySorts() throws {
        let store = try dir.store()
        let log = try store.collection("log", key: UInt64.self, value: String.self)
        try store.write { tx in
            for token in UInt64(1)...300 { try log.append("entry \(token)", forKey: token, in: tx) }
            try log.append("late", forKey: 150, in: tx)
            try log.append("again", forKey: 300, in: tx)
            try log.append("after", forKey: 301, in: tx)
        }
        #expect(try log.count() == 301)
        #expect(try log.get(1) == "entry 1")
        #expect(try log.get(150) == "late")
        #expect(try log.get(300) == "again")
        #expect(try log.get(301) == "after")
        #expect(try store.read { tx in try log.keys(in: tx) } == Array(UInt64(1)...301))
    }

    @Test func getPutDeleteContainsCount() throws {
        let store = try dir.store()
        let scores = try store.collection("scores", key: String.self, value: Int.self)
        #expect(try scores.get("alice") == nil)
        try store.write { tx throws in
            try scores.put(42, forKey: "alice", in: tx)
            try scores.put(7, forKey: "bob", in: tx)
            // Reads inside the write see its own writes.
            #expect(try scores.get("alice", in: tx) == 42)
        }
        #expect(try scores.get("alice") == 42)
        #expect(try scores.contains("bob"))
        #expect(try !scores.contains("carol"))
        #expect(try scores.count() == 2)
        try scores.put(43, forKey: "alice")
        #expect(try scores.get("alice") == 43)
        #expect(try scores.delete("alice"))
        #expect(try !scores.delete("alice"))
        #expect(try scores.get("alice") == nil)
        #expect(try scores.count() == 1)
        try store.read { tx throws in
            #expect(try scores.first(in: tx)?.key == "bob")
            #expect(try scores.last(in: tx)?.value == 7)
        }
    }

    @Test func throwingWriteLeavesNothing() throws {
        let store = try dir.store()
        let scores = try store.collection("scores", key: Int.self, value: String.self)
        struct Boom: Error {}
        #expect(throws: Boom.self) {
            try store.write { tx throws in
                try scores.put("x", forKey: 1, in: tx)
                throw Boom()
            }
        }
        #expect(try scores.count() == 0)
    }

    @Test func rangesForwardAndReverse() throws {
        let store = try dir.store()
        let numbers = try store.collection("numbers", key: Int.self, value: Int.self)
        try store.write { tx in for i in -10...10 { try numbers.put(i * i, forKey: i, in: tx) } }
        try store.read { tx throws in
            #expect(try numbers.keys(-2..<3, in: tx) == [-2, -1, 0, 1, 2])
            #expect(try numbers.keys(-2...3, in: tx) == [-2, -1, 0, 1, 2, 3])
            #expect(try numbers.keys(8..., in: tx) == [8, 9, 10])
            #expect(try numbers.keys(..<(-8), in: tx) == [-10, -9])
            #expect(try numbers.keys(...(-8), in: tx) == [-10, -9, -8])
            #expect(try numbers.keys(-2..<3, reverse: true, in: tx) == [2, 1, 0, -1, -2])
            #expect(try numbers.keys(-2...3, reverse: true, in: tx) == [3, 2, 1, 0, -1, -2])
            #expect(try numbers.keys(8..., reverse: true, in: tx) == [10, 9, 8])
            #expect(try numbers.keys(...(-8), reverse: true, in: tx) == [-8, -9, -10])
            #expect(try numbers.keys(reverse: true, limit: 3, in: tx) == [10, 9, 8])
            // Bounds between stored keys, and empty ranges.
            #expect(try numbers.keys(100..., in: tx) == [])
            #expect(try numbers.keys(100..., reverse: true, in: tx) == [])
            #expect(try numbers.keys(..<(-100), reverse: true, in: tx) == [])
            #expect(try numbers.keys(3..<3, in: tx) == [])
            #expect(try numbers.entries(2...2, in: tx).map(\.value) == [4])
            var sum = 0
            try numbers.forEach(0...10, in: tx) { _, v in sum += v; return true }
            #expect(sum == 385)
        }
    }

    @Test func tupleKeysAndPrefixScans() throws {
        let store = try dir.store()
        let items = try store.collection("items", key: Pair<String, Int>.self, value: String.self)
        try store.write { tx throws in
            for name in ["a", "ab", "b", "a\u{0}"] {
                for n in [3, 1, 2] { try items.put("\(name)#\(n)", forKey: Pair(name, n), in: tx) }
            }
        }
        try store.read { tx throws in
            #expect(try items.entries(prefix: "a", in: tx).map(\.value) == ["a#1", "a#2", "a#3"])
            #expect(try items.entries(prefix: "ab", reverse: true, in: tx).map(\.value) == ["ab#3", "ab#2", "ab#1"])
            #expect(try items.entries(prefix: "a\u{0}", in: tx).map(\.value) == ["a\u{0}#1", "a\u{0}#2", "a\u{0}#3"])
            #expect(try items.entries(prefix: "zz", in: tx).isEmpty)
            let all = try items.keys(in: tx)
            #expect(all == all.sorted())
            #expect(all.count == 12)
            #expect(try items.keys(Pair("a", 2)...Pair("ab", 1), in: tx).map(\.description) ==
                    ["(a, 2)", "(a, 3)", "(a\u{0}, 1)", "(a\u{0}, 2)", "(a\u{0}, 3)", "(ab, 1)"])
        }
        let names = try store.collection("names", key: String.self, value: Int.self)
        try store.write { tx in for (i, s) in ["app", "apple", "apricot", "banana"].enumerated() { try names.put(i, forKey: s, in: tx) } }
        #expect(try store.read { try names.entries(prefix: "app", in: $0).map(\.key) } == ["app", "apple"])
    }

    @Test func indexIsMaintainedOnPutUpdateAndDelete() throws {
        let store = try dir.store()
        let bySubscription = SecondaryIndex<Charge, Pair<UUID, Date>>("bySubscription") { Pair($0.subscriptionId, $0.billedAt) }
        let events = try store.collection("billingEvents", key: UUID.self, value: Charge.self, indexes: [bySubscription])
        let s1 = UUID(), s2 = UUID()
        let base = Date(timeIntervalSince1970: 1_760_000_000)
        var all: [Charge] = []
        for month in 0..<6 {
            for sub in [s1, s2] {
                all.append(Charge(id: UUID(), subscriptionId: sub, billedAt: base + Double(month) * 2_592_000,
                                        amount: Decimal(string: "980.00")!))
            }
        }
        try store.write { tx in for e in all.shuffled() { try events.put(e, forKey: e.id, in: tx) } }
        func dates(_ sub: UUID) throws -> [Date] {
            try store.read { try events.entries(in: bySubscription, prefix: sub, in: $0).map(\.value.billedAt) }
        }
        #expect(try dates(s1) == all.filter { $0.subscriptionId == s1 }.map(\.billedAt))
        #expect(try dates(s2).count == 6)

        // Update: move one event to the other subscription.
        var moved = all[0]
        moved.subscriptionId = s2
        try events.put(moved, forKey: moved.id)
        #expect(try dates(s1).count == 5)
        #expect(try dates(s2).count == 7)
        // Update that keeps the index key leaves one entry.
        moved.amount = 1200
        try events.put(moved, forKey: moved.id)
        #expect(try dates(s2).count == 7)
        // Delete removes the index entry.
        try events.delete(moved.id)
        #expect(try dates(s2).count == 6)
        // Range on the index key, reverse.
        let recent = try store.read { tx throws in
            try events.entries(in: bySubscription, Pair(s1, base + 2_592_000 * 3)..., reverse: true, in: tx)
        }
        // Expected from the model: every remaining event whose index key is at or after the bound, in
        // descending (index key, primary key) order.
        let bound = Pair(s1, base + 2_592_000 * 3)
        let expected = all.dropFirst()
            .filter { Pair($0.subscriptionId, $0.billedAt) >= bound }
            .sorted { (Pair($0.subscriptionId, $0.billedAt), $0.id) > (Pair($1.subscriptionId, $1.billedAt), $1.id) }
        #expect(recent.map(\.value) == expected)
        #expect(recent.map(\.key) == expected.map(\.id))
        #expect(!expected.isEmpty)
        #expect(try store.read { try events.entries(in: bySubscription, equalTo: Pair(s1, base + 2_592_000), in: $0).count } == 1)

        // The catalog records the index.
        let entry = try #require(try store.catalogEntry(forCollection: "billingEvents"))
        #expect(entry.indexes.map(\.name) == ["bySubscription"])
        #expect(entry.indexes.first?.keyEncoding == "tuple(uuid,date)")
        #expect(entry.keyEncoding == "uuid")
        #expect(entry.valueEncoding == .cbor)
    }

    @Test func indexAddedLaterIsBuiltAndDroppedIndexIsRemoved() throws {
        let store = try dir.store()
        let plain = try store.collection("events", key: UUID.self, value: Charge.self)
        let sub = UUID()
        try store.write { tx throws in
            for i in 0..<10 {
                let e = Charge(id: UUID(), subscriptionId: sub, billedAt: Date(timeIntervalSince1970: Double(i)), amount: 1)
                try plain.put(e, forKey: e.id, in: tx)
            }
        }
        let byDate = SecondaryIndex<Charge, Date>("byDate") { $0.billedAt }
        let indexed = try store.collection("events", key: UUID.self, value: Charge.self, indexes: [byDate])
        let ordered = try store.read { try indexed.entries(in: byDate, in: $0) }
        #expect(ordered.map(\.value.billedAt.timeIntervalSince1970) == (0..<10).map(Double.init))
        _ = try store.collection("events", key: UUID.self, value: Charge.self)
        #expect(try store.catalogEntry(forCollection: "events")?.indexes.isEmpty == true)
    }

    @Test func derivedCollectionFollowsItsSource() throws {
        let store = try dir.store()
        let checklist = try ChecklistStore(store: store)
        let records = ChecklistDataset.records(days: 40)
        try store.write { tx in for r in records { try checklist.records.put(r, forKey: r.day, in: tx) } }
        try store.read { tx throws in
            #expect(try checklist.summaries.count(in: tx) == records.count)
            for r in records {
                let summary = try #require(try checklist.summaries.get(r.day, in: tx))
                #expect(summary == DailySummary(r))
                #expect(summary.average(.perceive) == r.cachedCategoryAverages["perceive"])
            }
        }
        var changed = records[3]
        changed = DailyRecord(day: changed.day, scores: ["think.1": 5], memos: [:])
        try checklist.records.put(changed, forKey: changed.day)
        #expect(try checklist.summaries.get(changed.day)?.inputCount == 1)
        #expect(try checklist.summaries.get(changed.day)?.average(.perceive) == nil)
        try checklist.records.delete(changed.day)
        #expect(try checklist.summaries.get(changed.day) == nil)
        #expect(try store.catalogEntry(forCollection: "dailySummaries")?.derivedFrom == "dailyRecords")
        #expect(try store.catalogEntry(forCollection: "dailySummaries")?.valueEncoding == .fixed(size: 56))
        // The summary bytes can be read straight from the map.
        let day = records[0].day
        let count = try store.read { tx throws in
            try checklist.summaries.withValueBytes(forKey: day, in: tx) { $0.count }
        }
        #expect(count == MemoryLayout<DailySummary>.size)
    }

    @Test func catalogRejectsMismatchedTypesAndRunsMigrations() throws {
        let store = try dir.store()
        let v1 = try store.collection("people", key: Int.self, value: [String: String].self)
        try store.write { tx in for i in 0..<5 { try v1.put(["name": "p\(i)"], forKey: i, in: tx) } }
        #expect(throws: KVStoreError.self) { try store.collection("people", key: String.self, value: [String: String].self) }

        struct Person: Codable, Equatable { var name: String; var age: Int }
        var migrated: (Int, Int)?
        let v2 = try store.collection("people", key: Int.self, value: Person.self, schemaVersion: 2) { migration in
            migrated = (migration.fromVersion, migration.toVersion)
            try migration.rewriteValues(from: [String: String].self) { key, old in Person(name: old["name"] ?? "", age: key) }
        }
        #expect(migrated?.0 == 1 && migrated?.1 == 2)
        #expect(try v2.get(3) == Person(name: "p3", age: 3))
        #expect(try store.catalogEntry(forCollection: "people")?.schemaVersion == 2)
        do {
            _ = try store.collection("people", key: Int.self, value: Person.self, schemaVersion: 1)
            Issue.record("opening with an older schema version must fail")
        } catch let error as KVStoreError {
            #expect(error == .schemaTooNew(collection: "people", stored: 2, supported: 1))
        }
        // A failing migration changes nothing.
        struct Nope: Error {}
        #expect(throws: Nope.self) {
            _ = try store.collection("people", key: Int.self, value: Person.self, schemaVersion: 3) { _ in throw Nope() }
        }
        #expect(try store.catalogEntry(forCollection: "people")?.schemaVersion == 2)
        #expect(try v2.count() == 5)
    }

    @Test func badNamesKeysAndCorruptValuesGiveErrors() throws {
        let store = try dir.store()
        for bad in ["", "a/b", "x y", String(repeating: "n", count: 201), "名前"] {
            #expect(throws: KVStoreError.self) { try store.collection(bad, key: Int.self, value: Int.self) }
        }
        let texts = try store.collection("texts", key: String.self, value: String.self)
        do {
            try texts.put("x", forKey: String(repeating: "k", count: 600))
            Issue.record("an oversized key must be rejected")
        } catch let error as KVStoreError {
            #expect("\(error)".contains("511"))
        }
        do {
            try texts.put("x", forKey: "")
            Issue.record("an empty key must be rejected")
        } catch let error as KVStoreError {
            #expect("\(error)".contains("empty"))
        }
        // Write garbage under the collection through the raw view, then read it typed.
        let raw = try store.untypedCollection(named: "texts").collection
        try raw.put([0xFF, 0x00, 0x13], forKey: ByteKey(Array("broken".utf8)))
        do {
            _ = try texts.get("broken")
            Issue.record("corrupt bytes must throw")
        } catch let error as KVStoreError {
            guard case .corruptValue(let collection, let key, _, _) = error else { Issue.record("\(error)"); return }
            #expect(collection == "texts")
            #expect(key == "broken")
        }
        // Scans report it too, and a put over it repairs it.
        #expect(throws: KVStoreError.self) { try texts.entries() }
        try texts.put("fixed", forKey: "broken")
        #expect(try texts.get("broken") == "fixed")
    }
}
