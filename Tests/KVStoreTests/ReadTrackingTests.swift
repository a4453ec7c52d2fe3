import Foundation
import KVStore
import Testing
import TestSupport

/// ``ReadTransaction/trackingReads(_:)``: which collections and suites a read went through.
@Suite struct ReadTrackingTests {
    let dir = TemporaryDirectory()

    struct Person: Codable, Sendable { var name: String; var city: String }

    @Test func readsAreAttributedToTheirCollectionOrSuite() throws {
        let container = try dir.container()
        let store = container.store
        let byCity = SecondaryIndex<Person, String>("byCity") { $0.city }
        let people = try store.collection("people", key: Int.self, value: Person.self, indexes: [byCity])
        let scores = try store.collection("scores", key: String.self, value: Int.self)
        _ = try store.collection("unread", key: String.self, value: Int.self)
        let settings = try container.defaults(suite: "com.example.settings")
        try people.put(Person(name: "Ann", city: "Kyoto"), forKey: 1)
        try settings.set("dark", forKey: "theme")

        let (count, reads) = try store.read { tx in
            try tx.trackingReads { try scores.count(in: tx) + people.entries(in: byCity, equalTo: "Kyoto", in: tx).count }
        }
        #expect(count == 1)
        #expect(reads == ReadSet(targets: [.collection("scores"), .collection("people")], isComplete: true))
        #expect(reads.isAffected(by: [Mutation(target: .collection("people"), key: [1], operation: .put)]))
        #expect(!reads.isAffected(by: [Mutation(target: .collection("unread"), key: [1], operation: .put)]))

        // Nested calls: the outer one sees the inner one's reads too.
        let nested = try store.read { tx in
            try tx.trackingReads {
                _ = try settings.value(String.self, forKey: "theme", in: tx)
                return try tx.trackingReads { try scores.get("x", in: tx) }.reads
            }
        }
        #expect(nested.value.targets == [.collection("scores")])
        #expect(nested.reads.targets == [.defaults("com.example.settings"), .collection("scores")])
    }

    @Test func aDerivedCollectionBringsInItsSource() throws {
        let store = try dir.store()
        let cities = try store.collection("cities", key: Int.self, value: String.self)
        _ = try store.collection("people", key: Int.self, value: Person.self,
                                 derived: [Derivation(cities) { $0.city }])
        let reads = try store.read { tx in try tx.trackingReads { try cities.get(1, in: tx) }.reads }
        #expect(reads.targets == [.collection("cities"), .collection("people")])
    }

    @Test func aRawReadMakesTheSetIncomplete() throws {
        let store = try dir.store()
        let scores = try store.collection("scores", key: String.self, value: Int.self)
        let raw = try #require(try store.rawDatabase(named: scores.databaseName))
        let reads = try store.read { tx in try tx.trackingReads { try tx.rawGet(raw, Array("a".utf8)) }.reads }
        #expect(!reads.isComplete)
        #expect(reads.isAffected(by: .collection("anything")))
    }
}
