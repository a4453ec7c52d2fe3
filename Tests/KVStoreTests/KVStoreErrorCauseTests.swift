import Foundation
import Testing
import TestSupport
@testable import KVStore

@Suite struct KVStoreErrorCauseTests {
    let dir = TemporaryDirectory()

    struct Point: Codable { var x: Int }

    @Test func aCorruptValueKeepsTheCodecsError() throws {
        let store = try dir.store()
        let points = try store.collection("points", key: String.self, value: Point.self)
        let raw = try store.untypedCollection(named: "points").collection
        // Valid CBOR, wrong shape: the decoder's DecodingError is kept whole.
        try raw.put(CBORValue.text("not a point").encoded(), forKey: ByteKey(Array("p".utf8)))
        do {
            _ = try points.get("p")
            Issue.record("must throw")
        } catch let error as KVStoreError {
            guard case .corruptValue("points", "p", let reason, let underlying?) = error else {
                Issue.record("\(error)")
                return
            }
            #expect(reason == "\(underlying.error)")
            #expect(error.underlyingError != nil)
            #expect(!error.description.contains("\n"))
        }
        // In a defaults suite too.
        let defaults = try SharedDefaults(store: store, suiteName: "settings")
        try defaults.set("text", forKey: "k")
        do {
            _ = try defaults.value(Point.self, forKey: "k")
            Issue.record("must throw")
        } catch let error as KVStoreError {
            #expect(error.underlyingError != nil, "\(error)")
        }
    }

    @Test func causesCompareByTypeAndDescription() {
        struct A: Error, CustomStringConvertible { var description: String }
        struct B: Error, CustomStringConvertible { var description: String }
        #expect(KVStoreError.Cause(A(description: "x")) == KVStoreError.Cause(A(description: "x")))
        #expect(KVStoreError.Cause(A(description: "x")) != KVStoreError.Cause(A(description: "y")))
        #expect(KVStoreError.Cause(A(description: "x")) != KVStoreError.Cause(B(description: "x")))
        let withCause = KVStoreError.corruptValue(collection: "c", key: "k", reason: "x", underlying: .init(A(description: "x")))
        #expect(withCause != KVStoreError.corruptValue(collection: "c", key: "k", reason: "x"))
        #expect(Set([withCause, withCause]).count == 1)
    }
}
