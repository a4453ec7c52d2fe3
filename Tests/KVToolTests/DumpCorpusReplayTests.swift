import Foundation
import FuzzProperties
import Testing
import TestSupport

/// Replays every input kept in fuzz/corpus/dump/ through DumpProperty, the property of the `dump`
/// fuzz harness: the parser behind `kvtool load` must accept it with entries that match the header
/// and catalog, or reject it with a one-line CLIError of kind badInput. DumpProperty.swift here is a
/// symbolic link to fuzz/DumpProperty/DumpProperty.swift, the file the harness is built from.
@Suite("Dump corpus replay")
struct DumpCorpusReplayTests {
    @Test("every kept dump input satisfies the dump property", .blockingWork)
    func replay() throws {
        let report = try FuzzCorpus.replay(FuzzCorpus.folder("dump", testFile: #filePath)) { input throws(PropertyViolation) in
            try DumpProperty.check(input)
        }
        for failure in report.failures { Issue.record("fuzz/corpus/dump/\(failure)") }
        #expect(report.accepted > 0, "no input of fuzz/corpus/dump is accepted")
        #expect(!report.rejected.isEmpty, "no input of fuzz/corpus/dump is rejected")
        print("fuzz/corpus/dump: \(report)")
    }
}
