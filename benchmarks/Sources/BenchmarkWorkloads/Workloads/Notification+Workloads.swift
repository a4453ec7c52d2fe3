import Foundation
import KVStore
import SyncKit

extension BenchmarkWorkload {
    /// Commit (with history) → post → inotify → an observer thread wakes. In one process: the
    /// cross-process figure comes from HistoryProcessTests. Another thread does part of the work, so
    /// package-benchmark counts no mallocs and callgrind counts only the committing thread's
    /// instructions.
    static let notifications: [BenchmarkWorkload] = [
        BenchmarkWorkload("Commit to notification wakeup", "KVStore", instructionIterations: 20, maxIterations: 2_000, countsMallocs: false) {
            let fixture = try NotificationFixture()
            return { try fixture.commitAndWait() }
        },
    ]
}
