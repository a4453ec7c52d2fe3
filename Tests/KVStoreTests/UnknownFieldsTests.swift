import Foundation
import Testing
import TestSupport
@testable import KVStore

/// A typed write keeps the map keys that its type does not declare from the value it replaces, so an
/// older build of an app does not erase a newer build's fields.
@Suite struct UnknownFieldsTests {
    let dir = TemporaryDirectory()

    /// The newer build's record.
    struct RecordV2: Codable, Equatable {
        var a: String
        var b: Int
        var c: String?
        var tags: [String: Int]?
    }

    /// The older build's record: it has never heard of `c` or `tags`.
    struct RecordV1: Codable, Equatable {
        var a: String
        var b: Int
    }

    @Test func anOlderTypeKeepsTheFieldsItDoesNotKnow() throws {
        let store = try dir.store()
        let v2 = try store.collection("records", key: String.self, value: RecordV2.self)
        let v1 = try store.collection("records", key: String.self, value: RecordV1.self)
        try v2.put(RecordV2(a: "first", b: 1, c: "from v2", tags: ["x": 1]), forKey: "k")
        var old = try #require(try v1.get("k"))
        #expect(old == RecordV1(a: "first", b: 1))
        old.a = "edited by v1"
        try v1.put(old, forKey: "k")
        #expect(try v2.get("k") == RecordV2(a: "edited by v1", b: 1, c: "from v2", tags: ["x": 1]))
        // The bytes are what the newer build would have written itself: deterministic key order.
        let stored = try store.read { tx in try v2.withValueBytes(forKey: "k", in: tx) { Array($0) } }
        #expect(stored == (try CBOREncoder().encode(RecordV2(a: "edited by v1", b: 1, c: "from v2", tags: ["x": 1]))))
    }

    @Test func aFieldTheTypeDeclaresAndLeavesOutIsRemoved() throws {
        let store = try dir.store()
        let v2 = try store.collection("records", key: String.self, value: RecordV2.self)
        try v2.put(RecordV2(a: "a", b: 1, c: "set", tags: ["x": 1]), forKey: "k")
        try v2.put(RecordV2(a: "a", b: 1, c: nil, tags: nil), forKey: "k")
        #expect(try v2.get("k") == RecordV2(a: "a", b: 1, c: nil, tags: nil))
        let v1 = try store.collection("records", key: String.self, value: RecordV1.self)
        try v1.put(RecordV1(a: "again", b: 2), forKey: "k")
        #expect(try v2.get("k") == RecordV2(a: "again", b: 2, c: nil, tags: nil))
    }

    @Test func aDictionaryDeletesItsKeysAsWritten() throws {
        let store = try dir.store()
        let counts = try store.collection("counts", key: String.self, value: [String: Int].self)
        try counts.put(["a": 1, "b": 2], forKey: "k")
        try counts.put(["a": 1], forKey: "k")
        #expect(try counts.get("k") == ["a": 1])
        // A type that lists allKeys reads every key: none is unknown to it.
        let dynamic = try store.collection("counts", key: String.self, value: DynamicKeys.self)
        try counts.put(["a": 1, "b": 2], forKey: "d")
        try dynamic.put(DynamicKeys(values: ["a": 5]), forKey: "d")
        #expect(try counts.get("d") == ["a": 5])
    }

    @Test func theCodecCanBeToldToStoreExactlyWhatIsWritten() throws {
        let store = try dir.store()
        let v2 = try store.collection("records", key: String.self, value: RecordV2.self)
        let exact = try store.collection("records", key: String.self, codec: CBORCodec<RecordV1>(keepsUnknownFields: false))
        try v2.put(RecordV2(a: "a", b: 1, c: "from v2"), forKey: "k")
        try exact.put(RecordV1(a: "b", b: 2), forKey: "k")
        #expect(try v2.get("k") == RecordV2(a: "b", b: 2, c: nil))
    }

    @Test func valuesThatAreNotMapsOrNotReadableAreReplacedWhole() throws {
        let store = try dir.store()
        let v2 = try store.collection("records", key: String.self, value: RecordV2.self)
        let v1 = try store.collection("records", key: String.self, value: RecordV1.self)
        let raw = try #require(try store.rawDatabase(named: "c/records"))
        let stale: [[UInt8]] = [
            [0xFF],                                                  // not CBOR
            [0x18, 0x2A],                                            // 42: not a map
            [0xA2, 0x61, 0x61, 0x01, 0x61, 0x61, 0x02],             // {"a": 1, "a": 2}: a duplicate key
            [0xA1, 0x61, 0x7A, 0x01],                                // {"z": 1}: V1 cannot decode it (no a, b)
            [0xA3, 0x61, 0x61, 0x61, 0x78, 0x61, 0x62, 0x01, 0x61, 0x63],   // truncated
        ]
        for bytes in stale {
            try store.write { tx in try tx.rawPut(raw, "k".encodedKey, bytes) }
            try v1.put(RecordV1(a: "fresh", b: 3), forKey: "k")
            #expect(try v2.get("k") == RecordV2(a: "fresh", b: 3, c: nil), "\(bytes)")
        }
    }

    @Test func anIndefiniteLengthMapIsMergedAndDeepNestingIsReplacedWhole() throws {
        let store = try dir.store()
        let v2 = try store.collection("records", key: String.self, value: RecordV2.self)
        let v1 = try store.collection("records", key: String.self, value: RecordV1.self)
        let raw = try #require(try store.rawDatabase(named: "c/records"))
        // {_ "a": "x", "b": 1, "c": "kept"} with an indefinite length, as other encoders may write it.
        let indefinite: [UInt8] = [0xBF, 0x61, 0x61, 0x61, 0x78, 0x61, 0x62, 0x01, 0x61, 0x63, 0x64, 0x6B, 0x65, 0x70, 0x74, 0xFF]
        try store.write { tx in try tx.rawPut(raw, "k".encodedKey, indefinite) }
        try v1.put(RecordV1(a: "y", b: 2), forKey: "k")
        #expect(try v2.get("k") == RecordV2(a: "y", b: 2, c: "kept"))
        // A map whose unknown value nests 100,000 indefinite arrays: refused by the limits, unread.
        let deep: [UInt8] = [0xA3, 0x61, 0x61, 0x61, 0x78, 0x61, 0x62, 0x01, 0x61, 0x7A]
            + [UInt8](repeating: 0x9F, count: 100_000) + [UInt8](repeating: 0xFF, count: 100_000)
        try store.write { tx in try tx.rawPut(raw, "k".encodedKey, deep) }
        try v1.put(RecordV1(a: "z", b: 3), forKey: "k")
        #expect(try v2.get("k") == RecordV2(a: "z", b: 3, c: nil))
    }

    @Test func mergingIsLimitedToWhatTheCodecWouldRead() throws {
        // A stored map one byte under the limit, and a new value that would take the merge over it:
        // the new value is stored as written.
        var limits = CBORLimits.default
        limits.maxInputSize = 64
        let big = try CBOREncoder().encode(RecordV2(a: "a", b: 1, c: String(repeating: "c", count: 40)))
        let merged = big.withUnsafeBytes { old in
            CBORUnknownFields.merge(RecordV1.self, new: try! CBOREncoder().encode(RecordV1(a: String(repeating: "n", count: 30), b: 2)),
                                    old: old, limits: limits)
        }
        #expect(merged == nil)
        let fits = big.withUnsafeBytes { old in
            CBORUnknownFields.merge(RecordV1.self, new: try! CBOREncoder().encode(RecordV1(a: "n", b: 2)), old: old, limits: .default)
        }
        #expect(fits.map { try? CBORDecoder().decode(RecordV2.self, from: $0) } == RecordV2(a: "n", b: 2, c: String(repeating: "c", count: 40)))
    }
}

/// A type that reads its keys by listing them.
struct DynamicKeys: Codable, Equatable {
    var values: [String: Int]

    init(values: [String: Int]) { self.values = values }

    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        values = [:]
        for key in container.allKeys { values[key.stringValue] = try container.decode(Int.self, forKey: key) }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        for (key, value) in values { try container.encode(value, forKey: Key(stringValue: key)) }
    }
}
