import Foundation
import Testing
import TestSupport
@testable import KVStore

/// Collection migrations as a list (``CollectionMigrator``): the version derived from the list, each
/// migration run once, the `schemaVersion:` form's stores opened by a list without running anything
/// again, and a list that lost or reordered applied migrations refused in one line.
@Suite struct CollectionMigratorTests {
    let dir = TemporaryDirectory()

    struct Person: Codable, Equatable { var name: String; var age: Int }
    /// What every version of a person has: a version-1 dictionary and a `Person` both decode as it.
    struct Named: Decodable { var name: String }

    /// A list of `identifiers` whose migrations append their identifier to `ran` and set each
    /// person's age to the version they migrate to.
    static func migrator(_ identifiers: [String], ran: Locked<[String]>) -> CollectionMigrator<Int, Person> {
        var migrator = CollectionMigrator<Int, Person>()
        for identifier in identifiers {
            migrator.registerMigration(identifier) { migration in
                ran.withLock { $0.append(identifier) }
                try migration.rewriteValues(from: Named.self) { _, old in Person(name: old.name, age: migration.toVersion) }
            }
        }
        return migrator
    }

    /// Five people stored as dictionaries by a version-1 collection.
    func storeWithVersionOnePeople() throws -> Store {
        let store = try dir.store()
        let v1 = try store.collection("people", key: Int.self, value: [String: String].self)
        try store.write { tx in for i in 0..<5 { try v1.put(["name": "p\(i)"], forKey: i, in: tx) } }
        return store
    }

    @Test func eachMigrationRunsOnceInOrderAndAnAppendedOneRunsOnce() throws {
        let store = try storeWithVersionOnePeople()
        let ran = Locked<[String]>([])
        let people = try store.collection("people", key: Int.self, value: Person.self,
                                          migrator: Self.migrator(["name", "age"], ran: ran))
        #expect(ran.withLock { $0 } == ["name", "age"])
        #expect(try people.get(3) == Person(name: "p3", age: 3))
        var entry = try #require(try store.catalogEntry(forCollection: "people"))
        #expect(entry.schemaVersion == 3 && entry.migrations == ["name", "age"])

        // Opened again, by this handle or another: nothing runs.
        _ = try store.collection("people", key: Int.self, value: Person.self, migrator: Self.migrator(["name", "age"], ran: ran))
        _ = try dir.store().collection("people", key: Int.self, value: Person.self, migrator: Self.migrator(["name", "age"], ran: ran))
        #expect(ran.withLock { $0 } == ["name", "age"])

        // One appended: it alone runs, once.
        var migrator = Self.migrator(["name", "age"], ran: ran)
        migrator.registerMigration("nickname") { migration in
            ran.withLock { $0.append("nickname") }
            #expect(migration.fromVersion == 3 && migration.toVersion == 4)
        }
        #expect(migrator.schemaVersion == 4)
        _ = try store.collection("people", key: Int.self, value: Person.self, migrator: migrator)
        _ = try store.collection("people", key: Int.self, value: Person.self, migrator: migrator)
        #expect(ran.withLock { $0 } == ["name", "age", "nickname"])
        entry = try #require(try store.catalogEntry(forCollection: "people"))
        #expect(entry.schemaVersion == 4 && entry.migrations == ["name", "age", "nickname"])
        #expect(try people.count() == 5)
    }

    @Test func aCollectionCreatedWithAListStartsAtItsEndAndRunsNone() throws {
        let store = try dir.store()
        let ran = Locked<[String]>([])
        let people = try store.collection("people", key: Int.self, value: Person.self,
                                          migrator: Self.migrator(["a", "b", "c"], ran: ran))
        try people.put(Person(name: "x", age: 1), forKey: 1)
        #expect(ran.withLock { $0 }.isEmpty)
        let entry = try #require(try store.catalogEntry(forCollection: "people"))
        #expect(entry.schemaVersion == 4 && entry.migrations == ["a", "b", "c"])
    }

    /// A store migrated by the `schemaVersion:` form (written by it here, as programs before this
    /// list did: its catalog entry records no identifiers) opens with a list whose first migrations
    /// stand for its versions: they do not run again, and only an appended one runs.
    @Test func aStoreMigratedByTheVersionFormOpensWithAListWithoutRunningAnythingAgain() throws {
        let store = try storeWithVersionOnePeople()
        _ = try store.collection("people", key: Int.self, value: Person.self, schemaVersion: 3) { migration in
            try migration.rewriteValues(from: [String: String].self) { _, old in Person(name: old["name"] ?? "", age: 30) }
        }
        let before = try #require(try store.catalogEntry(forCollection: "people"))
        #expect(before.schemaVersion == 3 && before.migrations == nil)

        let ran = Locked<[String]>([])
        let reopened = try dir.store()
        let people = try reopened.collection("people", key: Int.self, value: Person.self,
                                             migrator: Self.migrator(["v2", "v3"], ran: ran))
        #expect(ran.withLock { $0 }.isEmpty, "a migration the version form applied ran again")
        #expect(try people.get(2) == Person(name: "p2", age: 30))
        let recorded = try #require(try reopened.catalogEntry(forCollection: "people"))
        #expect(recorded.schemaVersion == 3 && recorded.migrations == ["v2", "v3"])

        // The version form, at the same version, keeps the identifiers; an appended migration runs once.
        _ = try reopened.collection("people", key: Int.self, value: Person.self, schemaVersion: 3)
        #expect(try reopened.catalogEntry(forCollection: "people")?.migrations == ["v2", "v3"])
        _ = try reopened.collection("people", key: Int.self, value: Person.self,
                                    migrator: Self.migrator(["v2", "v3", "v4"], ran: ran))
        #expect(ran.withLock { $0 } == ["v4"])
        #expect(try people.get(2) == Person(name: "p2", age: 4))
    }

    @Test func aListThatLostOrReorderedAppliedMigrationsIsRefusedInOneLine() throws {
        let store = try storeWithVersionOnePeople()
        let ran = Locked<[String]>([])
        _ = try store.collection("people", key: Int.self, value: Person.self, migrator: Self.migrator(["a", "b"], ran: ran))
        let applied = try #require(try store.catalogEntry(forCollection: "people"))
        func refusal(_ identifiers: [String]) -> KVStoreError? {
            do {
                _ = try store.collection("people", key: Int.self, value: Person.self, migrator: Self.migrator(identifiers, ran: ran))
                return nil
            } catch {
                return error as? KVStoreError
            }
        }
        let reordered = try #require(refusal(["b", "a"]))
        #expect(reordered.description.contains(#"migration 1 is "a" in the store, "b" here"#))
        let droppedInside = try #require(refusal(["a", "c"]))
        #expect(droppedInside.description.contains(#"migration 2 is "b" in the store, "c" here"#))
        #expect(refusal(["a"]) == .schemaTooNew(collection: "people", stored: 3, supported: 2))
        #expect(refusal([]) == .schemaTooNew(collection: "people", stored: 3, supported: 1))
        let twice = try #require(refusal(["a", "b", "a"]))
        #expect(twice.description.contains("registers this migration twice"))
        let empty = try #require(refusal(["a", "b", ""]))
        #expect(empty.description.contains("empty"))
        for error in [reordered, droppedInside, twice, empty] {
            #expect(!error.description.contains("\n"), "not one line: \(error)")
            print("refused: \(error)")
        }
        #expect(ran.withLock { $0 } == ["a", "b"])
        #expect(try store.catalogEntry(forCollection: "people") == applied, "a refused list changed the catalog")
    }
}
