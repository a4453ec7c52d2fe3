import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A trait for tests (and suites, whose tests it then covers) that block a thread: a synchronous test
/// that runs `kvtool` or a helper process and waits for it, a semaphore, a cluster's `initdb`. Swift Testing runs a
/// synchronous test on the cooperative pool, which has as many threads as cores (two on the CI
/// machine): two such tests at once left no thread for any other suite's tasks, and the replication
/// suites' 10-second connection deadlines fired while their answers waited for a thread (measured with
/// `eu-stack` on the test process: both pool threads in `read` of a helper's output in 12 of 18
/// samples; CI failed with `cannot reach the sync server … no answer within 10 s`).
///
/// Each test of a suite with this trait runs with a task executor preference for
/// ``BlockingWorkExecutor/shared``: a few threads of its own, so a test that blocks holds one of
/// those, never a pool thread, and at most that many such tests block at once (as before, when the
/// pool's two threads bounded them). An async test with deadlines of its own should use `offPool`
/// for its blocking steps instead: its continuations would wait here behind the blocking tests (one
/// such test, marked, waited 33 s for a 5 s statement timeout in a full run).
public struct BlockingWork: SuiteTrait, TestTrait, TestScoping {
    public init() {}

    public var isRecursive: Bool { true }

    public func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        if Self.running { return try await function() }
        try await Self.$running.withValue(true) {
            try await withTaskExecutorPreference(BlockingWorkExecutor.shared) { try await function() }
        }
    }

    @TaskLocal static var running = false
}

extension Trait where Self == BlockingWork {
    /// Runs the suite's tests on threads of their own, off the cooperative pool (``BlockingWork``).
    public static var blockingWork: Self { Self() }
}

/// A task executor of a fixed number of threads of its own (named `blocking-work-N`, and marked so
/// that ``isCurrent`` can tell), for tests that block (``BlockingWork``). Jobs run in the order they came.
public final class BlockingWorkExecutor: TaskExecutor, @unchecked Sendable {
    /// Four threads: with the pool's two, the machine runs as many blocking tests at once as a 2-core
    /// machine's run did before, plus the pool's async work.
    public static let shared = BlockingWorkExecutor(threads: 4)

    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []
    public let threads: Int

    /// An executor of `threads` threads, which live as long as the process.
    public init(threads: Int) {
        self.threads = threads
        for index in 0..<threads {
            let thread = Thread { self.loop() }
            thread.name = "blocking-work-\(index)"
            thread.start()
        }
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        jobs.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Whether the caller runs on one of this executor's threads.
    public static var isCurrent: Bool { pthread_getspecific(marker) != nil }

    /// Set on the executor's threads (a thread's name is not readable from every context).
    private static let marker: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    private func loop() {
        pthread_setspecific(Self.marker, UnsafeRawPointer(bitPattern: 1))
        while true {
            condition.lock()
            while jobs.isEmpty { condition.wait() }
            let job = jobs.removeFirst()
            condition.unlock()
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}

/// Called by the runners that block their thread until a process ends or prints (``run(_:_:environment:stdin:timeout:sourceLocation:)``,
/// ``BackgroundProcess/wait(timeout:sourceLocation:)``, ``BackgroundProcess/waitForLine(timeout:where:)``):
/// a caller that runs a task on a thread that is not one of ``BlockingWorkExecutor``'s blocks an
/// executor's thread, the cooperative pool's unless it chose another. Under
/// `KVSTORE_POOL_BLOCKING=PATH` each such call appends its test and place to PATH (to find the
/// suites that need ``BlockingWork``).
func noteBlockingWait(_ what: String, sourceLocation: SourceLocation) {
    guard let path = ProcessInfo.processInfo.environment["KVSTORE_POOL_BLOCKING"],
          !BlockingWorkExecutor.isCurrent, withUnsafeCurrentTask(body: { $0 != nil }) else { return }
    let line = "\(Test.current.map { "\($0.id)" } ?? "?")\t\(sourceLocation.fileID):\(sourceLocation.line)\t\(what)\n"
    guard let handle = FileHandle(forWritingAtPath: path) ?? (FileManager.default.createFile(atPath: path, contents: nil) ? FileHandle(forWritingAtPath: path) : nil) else { return }
    handle.seekToEndOfFile()
    handle.write(Data(line.utf8))
    try? handle.close()
}
