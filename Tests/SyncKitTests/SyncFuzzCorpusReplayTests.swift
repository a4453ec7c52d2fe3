import Foundation
import FuzzProperties
import SyncFuzzProperties
import Testing

/// Replays every input kept in fuzz/corpus/<target>/ for SyncKit's parsers of live metadata (`feed`,
/// `manifest`, `history`) through the property its libFuzzer harness checks (the same code:
/// fuzz/SyncProperties/, the SyncFuzzProperties target), so that `make test` keeps every input the
/// fuzzer found interesting, and every crash it ever found, passing. KVStore's targets (`catalog`
/// among them) are replayed by FuzzCorpusReplayTests in KVStoreTests.
///
/// Each input must either be accepted with every check holding, or be rejected with the typed,
/// one-line error the parser documents (WidgetFeedError, SnapshotError, CBORError); a trap fails the
/// whole run. A missing or empty folder fails.
@Suite("SyncKit fuzz corpus replay")
struct SyncFuzzCorpusReplayTests {
    @Test("every kept input satisfies its target's property", arguments: SyncFuzzTarget.allCases)
    func replay(_ target: SyncFuzzTarget) throws {
        let report = try FuzzCorpus.replay(FuzzCorpus.folder(target.rawValue, testFile: #filePath)) { input throws(PropertyViolation) in
            try target.check(input)
        }
        for failure in report.failures { Issue.record("fuzz/corpus/\(target.rawValue)/\(failure)") }
        #expect(report.accepted > 0, "no input of fuzz/corpus/\(target.rawValue) is accepted")
        #expect(!report.rejected.isEmpty, "no input of fuzz/corpus/\(target.rawValue) is rejected")
        print("fuzz/corpus/\(target.rawValue): \(report)")
    }

    /// The hand-made seeds that stand for each kind of garbage a co-tenant can write are rejected
    /// (not merely survived): a manifest naming a path outside `Snapshots/` or an absurd generation,
    /// a feed whose length field lies, a history entry of an unknown kind or at a non-finite time.
    @Test("the hostile seeds are rejected", arguments: [
        (SyncFuzzTarget.manifest, ["seed-dotdot-path", "seed-absolute-path", "seed-slash-name", "seed-generation-huge",
                                   "seed-generation-int-overflow", "seed-generation-negative", "seed-last-negative",
                                   "seed-deep-nesting", "seed-generations-decrease"]),
        (SyncFuzzTarget.feed, ["seed-length-lies-short", "seed-length-lies-huge", "seed-checksum-wrong", "seed-version-0",
                               "seed-version-future", "seed-truncated-header"]),
        (SyncFuzzTarget.history, ["seed-entry-unknown-kind", "seed-entry-bad-name", "seed-entry-nan-time",
                                  "seed-entry-negative-token", "seed-entry-lying-length", "seed-consumer-negative",
                                  "seed-consumer-overflow", "seed-state-negative"]),
    ])
    func hostileSeedsAreRejected(_ target: SyncFuzzTarget, _ names: [String]) throws {
        let folder = FuzzCorpus.folder(target.rawValue, testFile: #filePath)
        for name in names {
            let input = [UInt8](try Data(contentsOf: folder.appendingPathComponent(name)))
            let outcome = try target.check(input)
            #expect(outcome != .accepted, "fuzz/corpus/\(target.rawValue)/\(name) was accepted")
        }
    }
}
