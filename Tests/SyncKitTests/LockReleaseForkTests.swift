import Foundation
import KVStore
@testable import SyncKit
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Issue 46, finding 10: a lock released while another thread of the process has forked and its child
/// has not called `exec` yet (Foundation's `Process.run` forks on every spawn; `.ci/run` under
/// AddressSanitizer, where that window is longer, lost `SyncServiceTests.oneOwnerAtATime…` to it:
/// "the lock was not free after release"). An `flock` lock belongs to the open file description, which
/// the child's copy of the descriptor shares: closing the holder's descriptor alone leaves the lock
/// held until the child execs or exits. A release unlocks first (`LOCK_UN`), which frees it for every
/// copy at once.
///
/// The child here is forked from another thread while the lock is held, and waits (`pause`) until the
/// test kills it: the window stays open for as long as the test looks.
@Suite struct LockReleaseForkTests {
    let dir = TemporaryDirectory()

    /// Forks on a thread of its own; the child holds copies of every descriptor and waits for a signal.
    static func forkAChildThatWaits() throws -> pid_t {
        let forked = Locked<pid_t?>(nil)
        Thread {
            let pid = fork()
            if pid == 0 { while true { pause() } }
            forked.withLock { $0 = pid }
        }.start()
        let deadline = Date().addingTimeInterval(BuildScale.seconds(20))
        while forked.withLock({ $0 }) == nil {
            guard Date() < deadline else { throw TestFailure("the thread did not fork within the deadline") }
            usleep(1_000)
        }
        let pid = forked.withLock { $0 }!
        guard pid > 0 else { throw TestFailure("fork failed: errno \(errno)") }
        return pid
    }

    static func reap(_ pid: pid_t) {
        guard pid > 0 else { return }  // kill(0) would signal the whole process group
        kill(pid, SIGKILL)
        var status: Int32 = 0
        _ = waitpid(pid, &status, 0)
    }

    @Test(.blockingWork) func syncOwnershipIsFreeAtOnceAfterReleaseWhileAForkedChildWaits() throws {
        let container = try SharedContainer(groupIdentifier: "group.com.example.forked", root: dir.path)
        let history = try History.attach(to: container)
        try history.enable(.collection("notes"))
        guard case .success(let ownership) = try SyncOwnership.acquire(container, mode: .once) else {
            Issue.record("the first acquisition failed")
            return
        }
        let child = try Self.forkAChildThatWaits()
        defer { Self.reap(child) }
        ownership.release()
        guard case .success(let next) = try SyncOwnership.acquire(container, mode: .live) else {
            Issue.record("the lock was not free after release: the child another thread forked still held it")
            return
        }
        next.release()
    }

    @Test(.blockingWork) func aFileLockIsFreeAtOnceAfterItIsReleasedWhileAForkedChildWaits() throws {
        let directory = open(dir.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        try #require(directory >= 0)
        defer { close(directory) }
        let path = dir.path + "/.publish.lock"
        var child: pid_t = 0
        do {
            let lock = try FileLock(in: directory, name: ".publish.lock", path: path, mode: 0o600, shared: false)
            try withExtendedLifetime(lock) { child = try Self.forkAChildThatWaits() }
        }
        defer { Self.reap(child) }
        let fd = open(path, O_RDWR | O_CLOEXEC)
        try #require(fd >= 0)
        defer { close(fd) }
        #expect(flock(fd, LOCK_EX | LOCK_NB) == 0, "the lock was not free after its release: errno \(errno)")
    }
}
