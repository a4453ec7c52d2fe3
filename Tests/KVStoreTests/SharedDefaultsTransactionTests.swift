import Foundation
import Testing
import TestSupport
@testable import KVStore

/// The typed getters' `in:` forms: several values from one snapshot, and reads inside a write.
@Suite struct SharedDefaultsTransactionTests {
    let dir = TemporaryDirectory()

    @Test(.blockingWork) func everyTypedGetterReadsInsideAGivenTransaction() throws {
        let container = try dir.container()
        let d = try container.defaults()
        try d.register(defaults: ["registered": 7])
        let url = URL(string: "https://example.com/a")!
        try container.store.write { tx in
            try d.set("hello", forKey: "s", in: tx)
            try d.set(42, forKey: "i", in: tx)
            try d.set(2.5, forKey: "f", in: tx)
            try d.set(true, forKey: "b", in: tx)
            try d.set(Data([1, 2, 3]), forKey: "data", in: tx)
            try d.set(["a", "b"], forKey: "arr", in: tx)
            try d.set(["k": 1] as [String: Any], forKey: "dict", in: tx)
            try d.set(url, forKey: "url", in: tx)
        }
        try container.store.read { tx throws in
            #expect(try d.string(forKey: "s", in: tx) == "hello")
            #expect(try d.integer(forKey: "i", in: tx) == 42)
            #expect(try d.double(forKey: "f", in: tx) == 2.5)
            #expect(try d.bool(forKey: "b", in: tx))
            #expect(try d.data(forKey: "data", in: tx) == Data([1, 2, 3]))
            #expect(try d.array(forKey: "arr", in: tx) as? [String] == ["a", "b"])
            #expect(try d.stringArray(forKey: "arr", in: tx) == ["a", "b"])
            #expect(try d.dictionary(forKey: "dict", in: tx)?["k"] as? Int == 1)
            #expect(try d.url(forKey: "url", in: tx) == url)
            #expect(try d.cborValue(forKey: "i", in: tx) == .unsigned(42))
            // Registered defaults show through, as in the forms without a transaction.
            #expect(try d.integer(forKey: "registered", in: tx) == 7)
            #expect(try d.integer(forKey: "missing", in: tx) == 0)
            #expect(try d.string(forKey: "missing", in: tx) == nil)
        }
        // The forms without a transaction give the same answers.
        #expect(try d.string(forKey: "s") == "hello")
        #expect(try d.integer(forKey: "i") == 42)
        #expect(try d.url(forKey: "url") == url)
    }

    @Test(.blockingWork) func severalValuesReadInOneTransactionComeFromOneSnapshot() throws {
        let container = try dir.container()
        let d = try container.defaults()
        try d.set(1, forKey: "a")
        try d.set(1, forKey: "b")
        let (a, b) = try container.store.read { tx in
            let a = try d.integer(forKey: "a", in: tx)
            // Another thread changes both keys in one write between the two reads.
            let thread = Thread {
                try? container.store.write { tx in
                    try d.set(2, forKey: "a", in: tx)
                    try d.set(2, forKey: "b", in: tx)
                }
            }
            thread.start()
            while try d.integer(forKey: "b") != 2 { usleep(1000) }
            return (a, try d.integer(forKey: "b", in: tx))
        }
        #expect(a == 1 && b == 1, "both from the snapshot the transaction began with")
    }

    @Test(.blockingWork) func insideAWriteTheInFormsSeeTheWritesOwnChanges() throws {
        let container = try dir.container()
        let d = try container.defaults()
        try d.set("old", forKey: "s")
        try container.store.write { tx throws in
            try d.set("new", forKey: "s", in: tx)
            #expect(try d.string(forKey: "s", in: tx) == "new")
        }
    }
}
