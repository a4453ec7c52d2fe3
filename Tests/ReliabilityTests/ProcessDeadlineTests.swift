import Foundation
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// The harness's own promise (issue 12, section 5): a process a test starts cannot hang the suite.
/// `run` and `BackgroundProcess.wait` kill a process still running at its deadline and fail the
/// test with a message; here the failure is the expected ("known") issue, so that these tests pass
/// only if it is recorded, and the process is really gone.
@Suite struct ProcessDeadlineTests {
    @Test(.blockingWork) func runKillsAHungProcessAtItsDeadlineAndFailsTheTest() throws {
        let started = monotonicNow()
        var result: ProcessResult?
        withKnownIssue("the deadline must record a failure that names the process") {
            result = try? run("/bin/sleep", ["300"], timeout: 1)
        } matching: { issue in
            "\(issue)".contains("did not finish within 1 s") && "\(issue)".contains("sleep 300")
        }
        let seconds = Double(monotonicNow() - started) / 1e9
        #expect(seconds < 30, "run returned after \(seconds) s")
        #expect(result?.status == SIGKILL, "\(String(describing: result))")
    }

    @Test(.blockingWork) func waitKillsAHungBackgroundProcessAtItsDeadlineAndFailsTheTest() throws {
        let process = try BackgroundProcess("/bin/sleep", ["300"])
        let started = monotonicNow()
        withKnownIssue("the deadline must record a failure that names the process") {
            process.wait(timeout: 1)
        } matching: { issue in
            "\(issue)".contains("did not finish within 1 s") && "\(issue)".contains("sleep 300")
        }
        let seconds = Double(monotonicNow() - started) / 1e9
        #expect(seconds < 30, "wait returned after \(seconds) s")
        #expect(process.timedOut)
        #expect(!process.process.isRunning && process.process.terminationReason == .uncaughtSignal)
        // A second wait (ProcessReaper's, say) returns at once and records nothing more.
        process.wait(timeout: 1)
    }

    @Test(.blockingWork) func aProcessThatFinishesInTimeRecordsNothing() throws {
        let result = try run("/bin/sh", ["-c", "echo done"], timeout: 30)
        #expect(result.status == 0 && result.stdout == "done\n")
        let process = try BackgroundProcess("/bin/sh", ["-c", "echo done"])
        let (status, lines, _) = process.wait(timeout: 30)
        #expect(status == 0 && lines == ["done"] && !process.timedOut)
    }
}
