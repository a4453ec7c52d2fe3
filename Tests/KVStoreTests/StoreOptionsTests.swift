import Foundation
import Testing
import TestSupport
@testable import KVStore

/// `SharedContainer.Options.store`, and what a second open of one path in a process may change.
@Suite struct StoreOptionsTests {
    let dir = TemporaryDirectory()

    @Test func theContainersStoreOptionsAreStoreOptions() throws {
        var options = SharedContainer.Options()
        options.store.mapSize = 1 << 20
        options.store.durability = .noMetaSync
        options.store.maxReaders = 50
        let container = try dir.container("group.com.example.options", options: options)
        #expect(container.options.store.mapSize == 1 << 20)
        #expect(try container.store.environmentInfo().mapSize == 1 << 20)
        #expect(container.store.options.durability == .noMetaSync)
        #expect(container.store.options.maxReaders == 50)
        // The sharing mode decides the files' permissions, whatever `store.fileMode` says.
        #expect(container.store.options.fileMode == options.sharing.fileMode)
        // `readOnly` is the store's.
        options.readOnly = true
        #expect(options.store.readOnly)
    }

    @Test func reopeningAPathWithConflictingOptionsThrowsNamingTheOption() throws {
        let first = try dir.store()
        let path = first.directory
        func reopen(_ change: (inout Store.Options) -> Void) throws -> Store {
            var options = Store.Options()
            change(&options)
            return try Store(directory: path, options: options)
        }
        let conflicts: [(String, (inout Store.Options) -> Void)] = [
            ("maxReaders", { $0.maxReaders = 7 }),
            ("maxMapSize", { $0.maxMapSize = 1 << 30 }),
            ("maxDatabases", { $0.maxDatabases = 16 }),
            ("fileMode", { $0.fileMode = 0o660 }),
            ("staleReaderCheckInterval", { $0.staleReaderCheckInterval = nil }),
        ]
        for (option, change) in conflicts {
            do {
                _ = try reopen(change)
                Issue.record("a second open with another \(option) must throw")
            } catch let error as KVStoreError {
                guard case .conflictingOptions(let reported, let detail) = error else { Issue.record("\(error)"); continue }
                #expect(reported == path)
                #expect(detail.hasPrefix(option + " is "), "\(detail)")
                #expect(!error.description.contains("\n"))
            }
        }
        // What may differ between handles does not throw.
        let same = try reopen { _ in }
        #expect(same.directory == path)
        _ = try reopen { $0.mapSize = 1 << 20 }
        _ = try reopen { $0.durability = .noSync }
        _ = try reopen { $0.clearStaleReadersOnOpen = false }
        // The first handle is as it was.
        let values = try first.collection("values", key: Int.self, value: Int.self)
        try values.put(1, forKey: 1)
        #expect(try values.get(1) == 1)
    }

    @Test func aReadOnlyHandleOnAReadWriteEnvironmentRefusesWrites() throws {
        let writer = try dir.store()
        let values = try writer.collection("values", key: Int.self, value: Int.self)
        try values.put(1, forKey: 1)
        var options = Store.Options()
        options.readOnly = true
        let reader = try Store(directory: writer.directory, options: options)
        #expect(reader.isReadOnly)
        #expect(!writer.isReadOnly)
        let readerValues = try reader.collection("values", key: Int.self, value: Int.self)
        #expect(try readerValues.get(1) == 1)
        #expect(throws: KVStoreError.readOnly(path: writer.directory)) { try readerValues.put(2, forKey: 1) }
        #expect(throws: KVStoreError.readOnly(path: writer.directory)) { try reader.write { _ in } }
        try values.put(3, forKey: 1)
        #expect(try readerValues.get(1) == 3)
    }

    @Test func aContainerAndAStoreOnTheSamePathMustAgree() throws {
        var options = SharedContainer.Options()
        options.store.maxDatabases = 64
        let container = try dir.container("group.com.example.agree", options: options)
        #expect(throws: KVStoreError.self) { try Store(directory: container.store.directory) }
        var matching = Store.Options()
        matching.maxDatabases = 64
        let store = try Store(directory: container.store.directory, options: matching)
        #expect(store.directory == container.store.directory)
    }
}
