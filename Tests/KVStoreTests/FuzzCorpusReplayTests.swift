import Foundation
import FuzzProperties
import Testing

/// Replays every input kept in fuzz/corpus/<target>/ through the property its libFuzzer harness
/// checks (the same code: fuzz/Properties/, the FuzzProperties target), so that `make test` keeps
/// every input the fuzzer found interesting, and every crash it ever found, passing. The `dump`
/// target's corpus is replayed by DumpCorpusReplayTests in KVToolTests.
///
/// Each input must either be accepted with every round trip holding, or be rejected with the typed
/// error the API documents (CBORError, KeyDecodingError, KVStoreError.invalidGroupIdentifier or
/// invalidPath), one line long; a trap fails the whole run. A missing or empty folder fails.
@Suite("Fuzz corpus replay")
struct FuzzCorpusReplayTests {
    @Test("every kept input satisfies its target's property", arguments: FuzzTarget.allCases)
    func replay(_ target: FuzzTarget) throws {
        let report = try FuzzCorpus.replay(FuzzCorpus.folder(target.rawValue, testFile: #filePath)) { input throws(PropertyViolation) in
            try target.check(input)
        }
        for failure in report.failures { Issue.record("fuzz/corpus/\(target.rawValue)/\(failure)") }
        // A corpus that only reaches one side of the property has lost most of its point.
        #expect(report.accepted > 0, "no input of fuzz/corpus/\(target.rawValue) is accepted")
        #expect(!report.rejected.isEmpty, "no input of fuzz/corpus/\(target.rawValue) is rejected")
        print("fuzz/corpus/\(target.rawValue): \(report)")
    }

    @Test("a missing or empty corpus folder fails the replay")
    func missingOrEmptyCorpusFails() throws {
        let empty = FileManager.default.temporaryDirectory.appendingPathComponent("kvstore-empty-corpus-\(getpid())")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: empty) }
        #expect(throws: CocoaError.self) { try FuzzCorpus.replay(empty) { _ throws(PropertyViolation) in .accepted } }
        #expect(throws: CocoaError.self) {
            try FuzzCorpus.replay(empty.appendingPathComponent("missing")) { _ throws(PropertyViolation) in .accepted }
        }
    }
}

/// The catalog seeds that stand for each kind of garbage a co-tenant can write into `_catalog` are
/// rejected by the parser every process reads the catalog with (not merely survived): an entry at
/// another key, a database other than its own, an unknown key encoding, an absurd fixed layout.
@Suite("Catalog garbage seeds")
struct CatalogSeedTests {
    @Test func hostileCatalogSeedsAreRejected() throws {
        let folder = FuzzCorpus.folder("catalog", testFile: #filePath)
        for name in ["wrong-key", "wrong-kind-key", "binary-key", "not-cbor", "cbor-int", "cbor-wrong-shape", "unknown-kind",
                     "unknown-key-encoding", "deep-key-encoding", "fixed-zero", "fixed-negative", "fixed-huge",
                     "value-encoding-newline", "database-catalog", "database-other", "index-database-other",
                     "index-twice", "name-dotdot", "name-long", "schema-zero", "defaults-with-index", "derived-from-self"] {
            let input = [UInt8](try Data(contentsOf: folder.appendingPathComponent("seed-" + name)))
            #expect(try FuzzTarget.catalog.check(input) != .accepted, "fuzz/corpus/catalog/seed-\(name) was accepted")
        }
        for name in ["valid-collection", "valid-defaults", "valid-history", "valid-derived", "valid-tuple"] {
            let input = [UInt8](try Data(contentsOf: folder.appendingPathComponent("seed-" + name)))
            #expect(try FuzzTarget.catalog.check(input) == .accepted, "fuzz/corpus/catalog/seed-\(name) was rejected")
        }
    }
}
