import Testing
import TestSupport

/// Checks kvtool's error contract on one run: the documented exit status, nothing on stdout, and
/// (except for usage errors, which swift-argument-parser words) one `kvtool: error:` line naming the
/// problem.
func expectOneLineError(_ r: ProcessResult, _ arguments: [String], status: Int32, mentioning fragment: String) {
    #expect(r.status == status, "\(arguments): \(r.stderr)")
    #expect(r.stderr.contains(fragment), "\(arguments): \(r.stderr)")
    #expect(r.stdout.isEmpty, "\(arguments): \(r.stdout)")
    if status != 64 {
        #expect(r.stderr.hasPrefix("kvtool: error: ") && r.stderr.filter { $0 == "\n" }.count == 1, "\(r.stderr)")
    }
}
