import Foundation
import Testing
import TestSupport
@testable import KVStore

@Suite struct SharedDefaultsTests {
    let dir = TemporaryDirectory()

    @Test(.blockingWork) func userDefaultsAPI() throws {
        let container = try dir.container()
        let d = try container.defaults()
        #expect(d.suiteName == "group.com.example.test")
        #expect(try d.string(forKey: "missing") == nil)
        #expect(try d.integer(forKey: "missing") == 0)
        #expect(try d.bool(forKey: "missing") == false)
        try d.set("hello", forKey: "s")
        try d.set(42, forKey: "i")
        try d.set(2.5, forKey: "f")
        try d.set(true, forKey: "b")
        try d.set(Data([1, 2, 3]), forKey: "data")
        try d.set(["a", "b"], forKey: "arr")
        try d.set(["k": 1, "nested": ["x": "y"]] as [String: Any], forKey: "dict")
        let date = Date()
        try d.set(date, forKey: "date")
        try d.set(URL(string: "https://example.com/a")!, forKey: "url")
        #expect(try d.string(forKey: "s") == "hello")
        #expect(try d.integer(forKey: "i") == 42)
        #expect(try d.string(forKey: "i") == "42")
        #expect(try d.double(forKey: "f") == 2.5)
        #expect(try d.integer(forKey: "f") == 2)
        #expect(try d.bool(forKey: "b"))
        #expect(try d.integer(forKey: "b") == 1)
        #expect(try d.data(forKey: "data") == Data([1, 2, 3]))
        #expect(try d.stringArray(forKey: "arr") == ["a", "b"])
        #expect(try d.array(forKey: "arr")?.count == 2)
        let dict = try #require(try d.dictionary(forKey: "dict"))
        #expect(dict["k"] as? Int == 1)
        #expect((dict["nested"] as? [String: Any])?["x"] as? String == "y")
        #expect(try d.object(forKey: "date") as? Date == date)
        #expect(try d.url(forKey: "url") == URL(string: "https://example.com/a"))
        try d.set("YES", forKey: "yes")
        #expect(try d.bool(forKey: "yes"))
        try d.set("17", forKey: "num")
        #expect(try d.integer(forKey: "num") == 17)

        try d.removeObject(forKey: "s")
        #expect(try d.string(forKey: "s") == nil)
        try d.set(nil, forKey: "i")
        #expect(try d.object(forKey: "i") == nil)

        try d.register(defaults: ["s": "fallback", "volume": 0.8])
        #expect(try d.string(forKey: "s") == "fallback")
        #expect(try d.double(forKey: "volume") == 0.8)
        try d.set("stored", forKey: "s")
        #expect(try d.string(forKey: "s") == "stored")
        let all = try d.dictionaryRepresentation()
        #expect(all["s"] as? String == "stored")
        #expect(all["volume"] as? Double == 0.8)
        #expect(try d.keys().contains("s"))
        #expect(try !d.keys().contains("volume"))  // registered values are never stored

        // The same instance per suite, and other suites are separate.
        #expect(try container.defaults() === d)
        let other = try container.defaults(suite: "com.example.other")
        #expect(try other.string(forKey: "s") == nil)
    }

    /// `string(forKey:)` reads a stored text string straight from the map; whatever that fast path
    /// does not take (other types, odd heads, bad bytes another process stored) goes through the
    /// general decoder, with the same answer or the same error as before.
    @Test(.blockingWork) func stringReadsAgreeWithTheGeneralDecoderOnStoredBytes() throws {
        let container = try dir.container()
        let d = try container.defaults()
        try d.set("seed", forKey: "seed")
        let raw = try #require(try container.store.rawDatabase(named: "d/" + d.suiteName))
        let cases: [(key: String, bytes: [UInt8], expected: String??)] = [
            ("ascii", [0x63] + Array("abc".utf8), "abc"),
            ("accented", [0x65] + Array("café".utf8), "café"),
            ("empty", [0x60], ""),
            ("long head", [0x78, 0x03] + Array("abc".utf8), "abc"),    // well-formed, not the shortest head
            ("number", [0x18, 0x2A], "42"),
            ("bool", [0xF5], "1"),
            ("chunked", [0x7F, 0x61, 0x61, 0x61, 0x62, 0xFF], "ab"),
            ("array", [0x81, 0x01], .some(nil)),
            ("bad utf8", [0x62, 0xC3, 0x28], nil),                    // an error, not a String
            ("trailing", [0x61, 0x61, 0x00], nil),
            ("truncated", [0x63, 0x61], nil),
            ("huge head", [0x7B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF], nil),
        ]
        try container.store.write { tx in
            for c in cases { try tx.rawPut(raw, Array(c.key.utf8), c.bytes) }
            try tx.rawPut(raw, Array("oversized".utf8), [0x7A, 0x00, 0x10, 0x00, 0x01] + [UInt8](repeating: 0x61, count: SharedDefaults.maxValueSize + 1))
        }
        for c in cases {
            if let expected = c.expected {
                #expect(try d.string(forKey: c.key) == expected, "\(c.key)")
            } else {
                #expect(throws: KVStoreError.self, "\(c.key)") { try d.string(forKey: c.key) }
                #expect(throws: KVStoreError.self, "\(c.key)") { try d.object(forKey: c.key) }
            }
        }
        #expect(throws: KVStoreError.self) { try d.string(forKey: "oversized") }
        // Keys that are not ASCII take the normalising path: both forms of "é" name one key.
        try d.set("v", forKey: "caf\u{E9}")
        #expect(try d.string(forKey: "cafe\u{301}") == "v")
        #expect(throws: KVStoreError.self) { try d.string(forKey: "") }
        #expect(throws: KVStoreError.self) { try d.string(forKey: String(repeating: "k", count: Store.maxKeySize + 1)) }
    }

    @Test(.blockingWork) func codableValuesAndLimits() throws {
        struct Settings: Codable, Equatable { var theme: String; var fontSize: Double; var tags: [String] }
        let d = try dir.container().defaults()
        let settings = Settings(theme: "dark", fontSize: 14.5, tags: ["a"])
        try d.set(encodable: settings, forKey: "settings")
        #expect(try d.value(Settings.self, forKey: "settings") == settings)
        #expect(throws: KVStoreError.self) { try d.value(Int.self, forKey: "settings") }

        do {
            try d.set(Data(count: SharedDefaults.maxValueSize + 1), forKey: "big")
            Issue.record("an oversized value must be rejected")
        } catch let error as KVStoreError {
            #expect("\(error)".contains("SharedFiles"))
            #expect("\(error)".contains("big"))
        }
        #expect(try d.data(forKey: "big") == nil)
        struct NotPlist {}
        #expect(throws: KVStoreError.self) { try d.set(NotPlist(), forKey: "x") }
        #expect(throws: KVStoreError.self) { try d.set("v", forKey: "") }
        #expect(throws: KVStoreError.self) { try d.set("v", forKey: String(repeating: "k", count: 600)) }
        #expect(throws: KVStoreError.self) { try SharedDefaults(store: d.store, suiteName: "bad/suite") }
    }

    @Test(.blockingWork) func aWriteInOneProcessIsTheNextReadInAnother() throws {
        let group = "group.com.example.defaults"
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        let d = try container.defaults()
        // Another process writes; this one reads with no synchronize().
        let w = try helper(["write-defaults", dir.path, group, "selectedTrainerId", "ABC-123"])
        #expect(w.status == 0, "\(w.stderr)")
        #expect(try d.string(forKey: "selectedTrainerId") == "ABC-123")
        // This process writes; another reads.
        try d.set("from-parent", forKey: "note")
        let r = try helper(["read-defaults", dir.path, group, "note"])
        #expect(r.stdout == "from-parent\n", "\(r.stderr)")
        for i in 0..<5 {
            try d.set("v\(i)", forKey: "counter")
            #expect(try helper(["read-defaults", dir.path, group, "counter"]).stdout == "v\(i)\n")
        }
    }

    // MARK: - Reads served from memory

    /// A getter without a transaction keeps what it read, and serves it again while nothing has
    /// committed: any commit of the store (of any suite, collection or process) makes the next get
    /// read the map again.
    @Test(.blockingWork) func readsAreServedFromMemoryUntilTheNextCommit() throws {
        let container = try dir.container()
        let d = try container.defaults()
        try d.set("one", forKey: "k")
        #expect(try d.string(forKey: "k") == "one")
        #expect(try d.string(forKey: "missing") == nil)
        #expect(d.committedValueCount == 2)
        // Served again, whichever getter asks.
        #expect(try d.string(forKey: "k") == "one")
        #expect(try d.object(forKey: "k") as? String == "one")
        #expect(d.committedValueCount == 2)
        // A commit anywhere in the store: the next get reads again and sees it.
        try d.set("two", forKey: "k")
        #expect(try d.string(forKey: "k") == "two")
        #expect(d.committedValueCount == 1)
        let other = try container.store.collection("other", key: Int.self, value: Int.self)
        try other.put(1, forKey: 1)
        #expect(try d.string(forKey: "k") == "two")
        #expect(d.committedValueCount == 1)
        try d.removeObject(forKey: "k")
        #expect(try d.string(forKey: "k") == nil)
        // A registered default answers for a key with nothing stored, and a stored value replaces it.
        try d.register(defaults: ["k": "fallback"])
        #expect(try d.string(forKey: "k") == "fallback")
        try d.set("stored", forKey: "k")
        #expect(try d.string(forKey: "k") == "stored")
    }

    /// Inside a write transaction of the store on this thread, a getter without a transaction still
    /// refuses to nest, cached or not; inside a read transaction it answers.
    @Test(.blockingWork) func cachedReadsStillRefuseToNestInAWrite() throws {
        let container = try dir.container()
        let d = try container.defaults()
        try d.set("v", forKey: "k")
        #expect(try d.string(forKey: "k") == "v")
        #expect(throws: KVStoreError.nestedTransaction(outer: .write, inner: .read)) {
            try container.store.write { _ in _ = try d.string(forKey: "k") }
        }
        #expect(try container.store.read { _ in try d.string(forKey: "k") } == "v")
    }

    /// What is kept is bounded: large values are read every time, and past the entry limit the cache
    /// starts again.
    @Test(.blockingWork) func theCacheIsBounded() throws {
        let container = try dir.container()
        let d = try container.defaults()
        let large = String(repeating: "x", count: CommittedValueCache.maxValueBytes + 1)
        try container.store.write { tx in
            try d.set(large, forKey: "large", in: tx)
            for i in 0 ..< CommittedValueCache.maxEntries + 10 { try d.set(i, forKey: "k\(i)", in: tx) }
        }
        #expect(try d.string(forKey: "large") == large)
        #expect(d.committedValueCount == 0)
        for i in 0 ..< CommittedValueCache.maxEntries + 10 { #expect(try d.integer(forKey: "k\(i)") == i) }
        #expect(d.committedValueCount <= CommittedValueCache.maxEntries)
        #expect(d.committedValueCount > 0)
    }

    /// Another process's commit is seen by the next get of a key this process has in memory.
    @Test(.blockingWork) func anotherProcessCommitIsSeenByTheNextCachedGet() throws {
        let group = "group.com.example.cached"
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        let d = try container.defaults()
        try d.set("parent", forKey: "k")
        for i in 0 ..< 5 {
            #expect(try d.string(forKey: "k") != "child-\(i)")   // read, and kept in memory
            let w = try helper(["write-defaults", dir.path, group, "k", "child-\(i)"], timeout: 60)
            #expect(w.status == 0, "\(w.stderr)")
            #expect(try d.string(forKey: "k") == "child-\(i)")
        }
        // A commit to another key, by another process, also means reading again.
        #expect(try d.string(forKey: "k") == "child-4")
        #expect(try helper(["write-defaults", dir.path, group, "other", "x"], timeout: 60).status == 0)
        #expect(try d.string(forKey: "other") == "x")
    }

    /// While another process commits a counter 1…N, gets on two threads of this one never go back in
    /// time, and see N once it is done.
    @Test(.blockingWork) func cachedGetsNeverGoBackWhileAnotherProcessWrites() throws {
        let group = "group.com.example.counter"
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        let d = try container.defaults()
        let n = 300
        let writer = try BackgroundProcess.helper(["count-defaults", dir.path, group, "n", "\(n)"])
        let failures = Locked<[String]>([])
        let done = Locked(false)
        DispatchQueue.concurrentPerform(iterations: 2) { thread in
            var last = 0
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline {
                do {
                    let value = try d.integer(forKey: "n")
                    if value < last { failures.withLock { $0.append("thread \(thread): \(value) after \(last)") } }
                    last = value
                    if value == n || done.withLock({ $0 }) { break }
                } catch {
                    failures.withLock { $0.append("thread \(thread): \(error)") }
                    break
                }
            }
        }
        done.withLock { $0 = true }
        let finished = writer.wait(timeout: 60)
        #expect(finished.status == 0, "\(finished.stderr)")
        #expect(failures.withLock { $0 } == [])
        #expect(try d.integer(forKey: "n") == n)
    }
}
