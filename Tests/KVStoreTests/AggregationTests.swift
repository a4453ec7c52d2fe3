import KVStore
import Testing
import TestSupport
import Workloads

/// `Aggregation`: per-bucket aggregates kept in step with a collection in the writing transaction,
/// exact after puts, overwrites and deletes (minimum and maximum included, which cannot be undone by
/// subtraction), computed when declared on an existing collection, refused when misdeclared, and
/// known to the catalog and the integrity check.
@Suite struct AggregationTests {
    let dir = TemporaryDirectory()

    /// Sum, count, minimum and maximum of the values in a bucket of ten keys.
    struct Stats: Codable, Hashable, Sendable {
        var count = 0
        var sum = 0
        var min = Int.max
        var max = Int.min
        var keys: [Int] = []

        mutating func add(_ key: Int, _ value: Int) {
            count += 1
            sum += value
            min = Swift.min(min, value)
            max = Swift.max(max, value)
            keys.append(key)
        }
    }

    static func tens(_ target: KVCollection<Int, Stats>) -> Aggregation<Int, Int> {
        Aggregation(target, bucket: { $0 >= 0 ? $0 / 10 * 10 : ($0 - 9) / 10 * 10 }, keys: { $0...($0 + 9) }, empty: Stats()) { stats, key, value in
            stats.add(key, value)
        }
    }

    /// What the stats should be, from the values alone.
    static func expected(_ values: [Int: Int]) -> [Int: Stats] {
        var stats: [Int: Stats] = [:]
        for key in values.keys.sorted() {
            let bucket = key >= 0 ? key / 10 * 10 : (key - 9) / 10 * 10
            stats[bucket, default: Stats()].add(key, values[key]!)
        }
        return stats
    }

    @Test func bucketsFollowPutsOverwritesAndDeletes() throws {
        let store = try dir.store()
        let stats = try store.collection("stats", key: Int.self, value: Stats.self)
        let values = try store.collection("values", key: Int.self, value: Int.self, aggregates: [Self.tens(stats)])
        var model: [Int: Int] = [:]
        var rng = SplitMix64(seed: 3)
        for round in 0..<40 {
            try store.write { tx in
                for _ in 0..<10 {
                    let key = Int(rng.next() % 200) - 100
                    if rng.next() % 3 == 0 {
                        try values.delete(key, in: tx)
                        model[key] = nil
                    } else {
                        let value = Int(rng.next() % 1_000)
                        try values.put(value, forKey: key, in: tx)
                        model[key] = value
                    }
                }
            }
            let stored = try store.read { tx in Dictionary(uniqueKeysWithValues: try stats.entries(in: tx).map { ($0.key, $0.value) }) }
            #expect(stored == Self.expected(model), "round \(round)")
        }
        // The minimum deleted: the bucket's minimum is the next one, not a stale value.
        let bucket = try #require(Self.expected(model).first { $0.value.count >= 2 })
        let minimumKey = try #require(bucket.value.keys.first { model[$0] == bucket.value.min })
        try store.write { tx in _ = try values.delete(minimumKey, in: tx) }
        model[minimumKey] = nil
        #expect(try stats.get(bucket.key) == Self.expected(model)[bucket.key])
        #expect(try store.read { tx in try values.checkMaintainedData(in: tx) }.isEmpty)
        #expect(try store.checkIntegrity().problems.isEmpty)
        let entry = try store.catalogEntry(forCollection: "stats")
        #expect(entry?.bucketed == true && entry?.derivedFrom == "values")
        #expect(try store.catalogEntry(forCollection: "values")?.derived == ["stats"])
    }

    @Test func anAggregationDeclaredOnAnExistingCollectionIsComputedThenAndCheckedAfter() throws {
        let store = try dir.store()
        do {
            let values = try store.collection("values", key: Int.self, value: Int.self)
            try store.write { tx in for key in 0..<95 { try values.put(key * 3, forKey: key, in: tx) } }
        }
        let stats = try store.collection("stats", key: Int.self, value: Stats.self)
        let values = try store.collection("values", key: Int.self, value: Int.self, aggregates: [Self.tens(stats)])
        let model = Dictionary(uniqueKeysWithValues: (0..<95).map { ($0, $0 * 3) })
        let stored = try store.read { tx in Dictionary(uniqueKeysWithValues: try stats.entries(in: tx).map { ($0.key, $0.value) }) }
        #expect(stored == Self.expected(model))
        #expect(stored.count == 10)

        // An aggregate changed behind the collection's back (another process writing raw bytes) is
        // found by the check, which names the bucket.
        let raw = try #require(try store.rawDatabase(named: stats.databaseName))
        try store.write { tx in try tx.rawPut(raw, 40.encodedKey, try CBOREncoder().encode(Stats())) }
        let problems = try store.read { tx in try values.checkMaintainedData(in: tx) }
        #expect(problems.map(\.key) == ["40"])
        #expect(problems.first?.kind == .derivedEntryMismatch)
        // …and so is one of a bucket without any value.
        try store.write { tx in
            try tx.rawPut(raw, 40.encodedKey, try CBOREncoder().encode(Self.expected(model)[40]!))
            try tx.rawPut(raw, 500.encodedKey, try CBOREncoder().encode(Stats()))
        }
        #expect(try store.read { tx in try values.checkMaintainedData(in: tx) }.map(\.key) == ["500"])
    }

    @Test func aBucketThatDoesNotCoverItsKeyIsRefusedAndTheWriteUndone() throws {
        let store = try dir.store()
        let stats = try store.collection("stats", key: Int.self, value: Stats.self)
        // Buckets of ten keys, but the range claims five.
        let broken = Aggregation<Int, Int>(stats, bucket: { $0 / 10 * 10 }, keys: { $0...($0 + 4) }, empty: Stats()) { $0.add($1, $2) }
        let values = try store.collection("values", key: Int.self, value: Int.self, aggregates: [broken])
        try values.put(1, forKey: 3)
        let error = #expect(throws: KVStoreError.self) {
            try store.write { tx in
                try values.put(2, forKey: 4, in: tx)
                try values.put(3, forKey: 7, in: tx)
            }
        }
        #expect("\(error.map { "\($0)" } ?? "")".contains("does not cover"))
        #expect(try values.get(4) == nil)
        #expect(try values.get(7) == nil)
        #expect(try stats.get(0) == Self.expected([3: 1])[0])

        // Buckets that go backwards are refused when computing them over an existing collection.
        let store2 = try dir.store("backwards")
        do {
            let values = try store2.collection("values", key: Int.self, value: Int.self)
            try store2.write { tx in for key in 0..<30 { try values.put(key, forKey: key, in: tx) } }
        }
        let stats2 = try store2.collection("stats", key: Int.self, value: Stats.self)
        let backwards = Aggregation<Int, Int>(stats2, bucket: { 100 - $0 / 10 * 10 }, keys: { b in (100 - b)...(109 - b) }, empty: Stats()) { $0.add($1, $2) }
        #expect(throws: KVStoreError.self) {
            _ = try store2.collection("values", key: Int.self, value: Int.self, aggregates: [backwards])
        }
        #expect(try store2.catalogEntry(forCollection: "values")?.derived == [])
    }

    @Test func aCollectionCannotAggregateIntoItselfOrTwiceIntoOneTarget() throws {
        let store = try dir.store()
        let stats = try store.collection("stats", key: Int.self, value: Stats.self)
        #expect(throws: KVStoreError.self) {
            _ = try store.collection("values", key: Int.self, value: Int.self, aggregates: [Self.tens(stats), Self.tens(stats)])
        }
    }
}
