import Foundation
import Testing
import TestSupport
import KVStore

/// A recursive value, to build nesting of any depth.
private struct Node: Codable, Equatable {
    var children: [Node]

    static func nested(_ depth: Int) -> Node {
        var node = Node(children: [])
        for _ in 1 ..< depth { node = Node(children: [node]) }
        return node
    }
}

/// Oversized and deeply nested values and keys are refused when written, with a typed error, so that
/// nothing is ever stored that reading would refuse; and a refused write changes nothing.
@Suite struct HostileValueTests {
    let dir = TemporaryDirectory()

    @Test func aValueOverTheDecodeSizeLimitIsRefusedOnWrite() throws {
        let store = try dir.store()
        let blobs = try store.collection("blobs", key: String.self, value: Data.self)
        try blobs.put(Data([1, 2, 3]), forKey: "big")
        let limit = CBORLimits.default.maxInputSize
        #expect {
            try blobs.put(Data(repeating: 7, count: limit), forKey: "big")  // plus its CBOR header
        } throws: { error in
            guard case KVStoreError.encodingFailed(let collection, let reason) = error else { return false }
            return collection == "blobs" && reason.contains("over the maxInputSize limit of \(limit)")
        }
        #expect(try blobs.get("big") == Data([1, 2, 3]))
        // Just under the limit still round-trips.
        let largest = Data(repeating: 9, count: limit - 5)  // a 5-byte CBOR header
        try blobs.put(largest, forKey: "largest")
        #expect(try blobs.get("largest") == largest)
    }

    @Test func aValueNestedDeeperThanTheDecoderAcceptsIsRefusedOnWrite() throws {
        let store = try dir.store()
        let nodes = try store.collection("nodes", key: String.self, value: Node.self)
        let deepest = Node.nested(CBORLimits.default.maxDepth / 2)  // each level is a map and an array
        try nodes.put(deepest, forKey: "ok")
        #expect(try nodes.get("ok") == deepest)
        #expect {
            try nodes.put(Node.nested(100), forKey: "deep")
        } throws: { error in
            guard case KVStoreError.encodingFailed(_, let reason) = error else { return false }
            return reason.contains("nesting is deeper than maxDepth")
        }
        #expect(try nodes.get("deep") == nil)
        #expect(try nodes.count() == 1)
    }

    @Test func defaultsRefuseDeepValuesAndOversizedOnes() throws {
        let container = try dir.container()
        let defaults = try container.defaults()
        var deep: Any = "leaf"
        for _ in 0 ..< 100 { deep = [deep] }
        #expect(throws: KVStoreError.self) { try defaults.set(deep, forKey: "deep") }
        #expect(try defaults.object(forKey: "deep") == nil)
        #expect(throws: KVStoreError.self) { try defaults.set(String(repeating: "x", count: SharedDefaults.maxValueSize + 1), forKey: "big") }
        #expect(try defaults.object(forKey: "big") == nil)
    }

    @Test func oversizedAndEmptyKeysAreRefused() throws {
        let store = try dir.store()
        let names = try store.collection("names", key: String.self, value: Int.self)
        try names.put(1, forKey: String(repeating: "k", count: 511))  // LMDB's largest key
        for key in [String(repeating: "k", count: 512), String(repeating: "k", count: 600), ""] {
            #expect {
                try names.put(2, forKey: key)
            } throws: { error in
                guard case KVStoreError.invalidKey(let collection, _) = error else { return false }
                return collection == "names"
            }
        }
        #expect(try names.count() == 1)
        #expect(try names.get(String(repeating: "k", count: 511)) == 1)
    }
}
