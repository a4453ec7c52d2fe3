import Foundation
import Testing
import TestSupport
import KVStore
import Workloads
#if canImport(Glibc)
import Glibc
#endif

/// `Store.copy` (a compacted copy from one read transaction) and `Store(copyFile:)`.
@Suite struct StoreCopyTests {
    let dir = TemporaryDirectory()

    struct Person: Codable, Equatable {
        var name: String
        var city: String
    }

    static let byCity = SecondaryIndex<Person, String>("byCity") { $0.city }

    /// A store with a collection with an index, a derived collection, and a defaults suite.
    func fixture() throws -> Store {
        let store = try dir.store()
        let people = try store.collection("people", key: Int.self, value: Person.self, indexes: [Self.byCity])
        let checklist = try ChecklistStore(store: store)
        try store.write { tx in
            for i in 0..<50 { try people.put(Person(name: "p\(i)", city: i % 3 == 0 ? "Fukuoka" : "Tokyo"), forKey: i, in: tx) }
            for record in ChecklistDataset.records(days: 40) { try checklist.records.put(record, forKey: record.day, in: tx) }
        }
        try SharedDefaults(store: store, suiteName: "settings").set("ABC", forKey: "selectedTrainerId")
        return store
    }

    @Test func theCopyHoldsEveryDatabaseAndNamesItsSourceTransaction() throws {
        let store = try fixture()
        let result = try store.copy(toNewFile: dir.path + "/copy.mdb")
        #expect(result.sourceTransactionID == (try store.environmentInfo().lastTransactionID))
        var info = stat()
        #expect(stat(dir.path + "/copy.mdb", &info) == 0)
        #expect(result.size == Int(info.st_size))
        #expect(info.st_mode & 0o777 == 0o600)

        let copy = try Store(copyFile: dir.path + "/copy.mdb")
        #expect(copy.isReadOnly && copy.isCopyFile)
        // Same catalog, same counts, database by database (catalog, observer requirements, people, its
        // index, records, summaries, their months, the defaults suite).
        let original = try store.catalogWithCounts()
        let copied = try copy.catalogWithCounts()
        #expect(copied.map(\.entry) == original.map(\.entry))
        #expect(copied.map(\.count) == original.map(\.count))
        #expect(result.databases == 8)
        #expect(result.entries == original.count + original.map(\.count).reduce(0, +) + 50)  // catalog + data + index

        // Typed reads work, including through the index and the derived collection.
        let people = try copy.collection("people", key: Int.self, value: Person.self, indexes: [Self.byCity])
        #expect(try people.get(3) == Person(name: "p3", city: "Fukuoka"))
        let fukuoka = try copy.read { try people.entries(in: Self.byCity, equalTo: "Fukuoka", in: $0).map(\.key) }
        #expect(fukuoka == Array(stride(from: 0, to: 50, by: 3)))
        let checklist = try ChecklistStore(store: copy)
        #expect(try checklist.summaries.count() == ChecklistDataset.records(days: 40).count)
        #expect(try SharedDefaults(store: copy, suiteName: "settings").string(forKey: "selectedTrainerId") == "ABC")
    }

    @Test func theCopyIsCompacted() throws {
        let store = try dir.store()
        let blobs = try store.collection("blobs", key: Int.self, value: [UInt8].self)
        for batch in 0..<10 {
            try store.write { tx in for i in 0..<100 { try blobs.put([UInt8](repeating: 7, count: 700), forKey: batch * 100 + i, in: tx) } }
        }
        try store.write { tx in for i in 0..<1000 where i % 10 != 0 { try blobs.delete(i, in: tx) } }
        let info = try store.environmentInfo()
        let result = try store.copy(toNewFile: dir.path + "/copy.mdb")
        print("source \(info.usedPages * info.pageSize) bytes in use, compacted copy \(result.size) bytes")
        #expect(result.size * 4 < info.usedPages * info.pageSize)
        let copy = try Store(copyFile: dir.path + "/copy.mdb")
        let copied = try copy.collection("blobs", key: Int.self, value: [UInt8].self)
        #expect(try copy.read { try copied.keys(in: $0) } == Array(stride(from: 0, to: 1000, by: 10)))
    }

    @Test func eachCopyIsOneCommittedStateWhileAnotherThreadWrites() throws {
        let store = try dir.store()
        // Invariant: the two collections always hold opposite values at the same keys.
        let plus = try store.collection("plus", key: Int.self, value: Int.self)
        let minus = try store.collection("minus", key: Int.self, value: Int.self)
        try store.write { tx in try plus.put(0, forKey: 0, in: tx); try minus.put(0, forKey: 0, in: tx) }
        let done = Flag()
        let writer = Thread {
            var i = 1
            while !done.isSet {
                try? store.write { tx in
                    try plus.put(i, forKey: i % 37, in: tx)
                    try minus.put(-i, forKey: i % 37, in: tx)
                }
                i += 1
            }
        }
        writer.start()
        defer { done.set() }
        var previous = 0
        for n in 0..<12 {
            let path = dir.path + "/copy-\(n).mdb"
            let result = try store.copy(toNewFile: path)
            #expect(result.sourceTransactionID >= previous)
            previous = result.sourceTransactionID
            let copy = try Store(copyFile: path)
            let p = try copy.collection("plus", key: Int.self, value: Int.self)
            let m = try copy.collection("minus", key: Int.self, value: Int.self)
            let (ps, ms) = try copy.read { tx in (try p.entries(in: tx), try m.entries(in: tx)) }
            #expect(ps.map(\.key) == ms.map(\.key))
            #expect(zip(ps, ms).allSatisfy { $0.value == -$1.value })
        }
        done.set()
        #expect(previous > 1)
    }

    @Test func aSnapshotIsReadOnlyNeedsNoLockFileAndCanBeCopiedAgain() throws {
        let store = try fixture()
        let path = dir.path + "/copy.mdb"
        try store.copy(toNewFile: path)
        let copy = try Store(copyFile: path)
        let people = try copy.collection("people", key: Int.self, value: Person.self, indexes: [Self.byCity])
        #expect(throws: KVStoreError.readOnly(path: path)) { try people.put(Person(name: "x", city: "y"), forKey: 99) }
        #expect(throws: KVStoreError.readOnly(path: path)) { try copy.write { _ in } }
        // MDB_NOLOCK: nothing but the file itself.
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasPrefix("copy") } == ["copy.mdb"])
        // A copy of a snapshot has the same content; the snapshot's own last transaction is its
        // one building commit.
        let again = try copy.copy(toNewFile: dir.path + "/again.mdb")
        #expect(again.sourceTransactionID == 1)
        #expect(try Store(copyFile: dir.path + "/again.mdb").catalogWithCounts().map(\.count)
                == (try copy.catalogWithCounts().map(\.count)))
    }

    @Test func badSnapshotFilesGiveClearErrors() throws {
        let garbage = dir.path + "/garbage.mdb"
        try Data(repeating: 0x5A, count: 16384).write(to: URL(fileURLWithPath: garbage))
        #expect(throws: LMDBError.invalid) { try Store(copyFile: garbage) }
        #expect(throws: KVStoreError.io(operation: "open store copy", path: dir.path + "/missing.mdb", errno: ENOENT)) {
            try Store(copyFile: dir.path + "/missing.mdb")
        }
        #expect(throws: KVStoreError.invalidPath(dir.path, reason: "a store copy is a regular file")) {
            try Store(copyFile: dir.path)
        }
    }

    @Test func theCopyWritesTheFileItWasGivenEvenIfItsDirectoryIsSwappedForALink() throws {
        let store = try dir.store()
        try store.collection("scores", key: String.self, value: Int.self).put(7, forKey: "a")
        let inbox = dir.path + "/inbox", parked = dir.path + "/inbox.parked", outside = dir.path + "/outside"
        for path in [inbox, outside] { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
        let fd = open(inbox + "/copy.mdb", O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        #expect(fd >= 0)
        defer { close(fd) }
        // The directory is swapped for a link after the file was created: LMDB, which opens files by
        // path, must still write the file the caller holds, and never create one through the link.
        #expect(rename(inbox, parked) == 0 && symlink(outside, inbox) == 0)
        let copy = try store.copy(intoEmptyFile: fd, at: inbox + "/copy.mdb")
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
        let snapshot = try Store(copyFile: parked + "/copy.mdb")
        #expect(try snapshot.collection("scores", key: String.self, value: Int.self).get("a") == 7)
        #expect(copy.entries >= 1)
    }

    @Test func theCopyNeverOverwritesOrWritesIntoAFileWithContent() throws {
        let store = try fixture()
        let existing = dir.path + "/existing.mdb"
        try Data("keep me".utf8).write(to: URL(fileURLWithPath: existing))
        #expect(throws: KVStoreError.io(operation: "create copy file", path: existing, errno: EEXIST)) {
            try store.copy(toNewFile: existing)
        }
        let fd = open(existing, O_RDWR)
        defer { close(fd) }
        #expect(throws: KVStoreError.invalidPath(existing, reason: "the copy must go to a new, empty file")) {
            try store.copy(intoEmptyFile: fd, at: existing)
        }
        // The descriptor decides which file is written (LMDB opens it through /proc/self/fd), whatever
        // the path names now.
        let empty = dir.path + "/empty.mdb", other = dir.path + "/other.mdb"
        for path in [empty, other] { #expect(FileManager.default.createFile(atPath: path, contents: nil)) }
        let emptyFD = open(empty, O_RDWR)
        defer { close(emptyFD) }
        let copy = try store.copy(intoEmptyFile: emptyFD, at: other)
        #expect(try FileManager.default.attributesOfItem(atPath: empty)[.size] as? Int == copy.size)
        #expect(try FileManager.default.attributesOfItem(atPath: other)[.size] as? Int == 0)
        #expect(try Data(contentsOf: URL(fileURLWithPath: existing)) == Data("keep me".utf8))
        // Inside a transaction the databases cannot be opened first: a clear error, no file.
        let inside = dir.path + "/inside.mdb"
        #expect(throws: KVStoreError.self) { try store.read { _ in try store.copy(toNewFile: inside) } }
        #expect(!FileManager.default.fileExists(atPath: inside))
    }
}

/// A flag one thread sets and another polls.
final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}
