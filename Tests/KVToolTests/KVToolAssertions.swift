import Testing
import TestSupport

/// Checks kvtool's error contract on one run: the documented exit status, nothing on stdout, and one
/// `kvtool: error:` line on stderr naming the problem (usage errors included).
func expectOneLineError(_ r: ProcessResult, _ arguments: [String], status: Int32, mentioning fragment: String) {
    #expect(r.status == status, "\(arguments): \(r.stderr)")
    #expect(r.stderr.contains(fragment), "\(arguments): \(r.stderr)")
    #expect(r.stdout.isEmpty, "\(arguments): \(r.stdout)")
    #expect(r.stderr.hasPrefix("kvtool: error: ") && r.stderr.filter { $0 == "\n" }.count == 1, "\(arguments): \(r.stderr)")
}
