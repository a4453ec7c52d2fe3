import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport

/// History and notifications across real processes.
@Suite struct HistoryProcessTests {
    let dir = TemporaryDirectory()

    /// Parses "end T gaps G duplicates D".
    func summary(_ process: BackgroundProcess) -> (end: UInt64, gaps: Int, duplicates: Int)? {
        guard let line = process.output.last(where: { $0.hasPrefix("end ") }) else { return nil }
        let parts = line.split(separator: " ")
        return (UInt64(parts[1])!, Int(parts[3])!, Int(parts[5])!)
    }

    @Test func everyConsumerSeesTheWritersHistoryInOrderWithoutGapsEvenWhenKilled() throws {
        let group = "group.com.example.consumers"
        _ = try dir.container(group)
        let transactions = 300
        let expected = (0..<transactions).reduce(0) { $0 + 1 + $1 % 3 }
        let writer = try BackgroundProcess.helper(["history-writer", dir.path, group, String(transactions)])
        let steady = try ["first", "second"].map {
            try BackgroundProcess.helper(["history-consumer", dir.path, group, $0, String(expected)])
        }
        // The third consumer is killed after its first acknowledgement, then started again.
        let doomed = try BackgroundProcess.helper(["history-consumer", dir.path, group, "third", String(expected)])
        #expect(doomed.waitForLine { $0.hasPrefix("acked") } != nil)
        doomed.kill()
        doomed.wait()
        // The fault was injected: the consumer died by the kill, before it had read everything.
        #expect(doomed.process.terminationReason == .uncaughtSignal, "the third consumer finished before it was killed")
        let ackedBeforeDeath = doomed.output.filter { $0.hasPrefix("acked ") }.compactMap { UInt64($0.dropFirst(6)) }.max() ?? 0
        #expect(doomed.output.contains { $0.hasPrefix("end ") } == false)

        #expect(writer.wait().status == 0)
        #expect(writer.output.last == "done \(expected)")
        let reborn = try BackgroundProcess.helper(["history-consumer", dir.path, group, "third", String(expected)])
        for consumer in steady + [reborn] { #expect(consumer.wait().status == 0) }

        for consumer in steady {
            let result = summary(consumer)
            #expect(result?.end == UInt64(expected))
            #expect(result?.gaps == 0 && result?.duplicates == 0)
            #expect(consumer.output.first == "start 0")
        }
        // The restarted consumer resumes at (or after) what it acknowledged before it died, and reads
        // on from there without a gap.
        let resumedAt = reborn.output.first.flatMap { UInt64($0.dropFirst(6)) } ?? 0
        #expect(resumedAt >= ackedBeforeDeath && ackedBeforeDeath > 0)
        let result = summary(reborn)
        #expect(result?.end == UInt64(expected))
        #expect(result?.gaps == 0 && result?.duplicates == 0)

        // The store agrees: every consumer is at the end, and the history holds every entry once.
        let container = try dir.container(group)
        let history = try History.attach(to: container)
        #expect(try history.consumers().map(\.token.rawValue) == [UInt64](repeating: UInt64(expected), count: 3))
        let all = (try history.changes(since: .zero).transactions ?? []).flatMap(\.entries)
        #expect(all.map(\.token.rawValue) == Array(1...UInt64(expected)))
        #expect(Set(all.map(\.transactionID)).count == transactions)
    }

    @Test func aStoppedObserverNeverBlocksTheWriterAndStillLearnsOfTheChange() throws {
        let group = "group.com.example.stopped"
        let container = try dir.container(group)
        _ = try History.attach(to: container)
        let defaults = try container.defaults()
        let count = 2_000
        let observer = try BackgroundProcess.helper(["notify-latency", dir.path, group, String(count)])
        #expect(observer.waitForLine { $0.hasPrefix("ready") } != nil)
        observer.kill(SIGSTOP)
        // Thousands of commits and posts while the observer is stopped: the kernel queues its inotify
        // events (and would report an overflow rather than block), so none of them waits for it.
        for seq in 1...count {
            try container.store.write { tx in try defaults.set(seq, forKey: "seq", in: tx) }
        }
        observer.kill(SIGCONT)
        let result = observer.wait()
        #expect(result.status == 0, "\(result.stderr)")
        // Woken after it resumed, it reads the latest state: the last change is never lost.
        #expect(result.lines.contains { $0.hasPrefix("seq \(count) ") })
    }

    /// Records the time each commit returned from LMDB, before later observers (History's post) run.
    final class CommitClock: WriteObserver, @unchecked Sendable {
        private let lock = NSLock()
        private var last: UInt64 = 0
        func transactionDidCommit(_ commit: CommittedTransaction) {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            lock.lock(); last = UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec); lock.unlock()
        }
        var lastCommit: UInt64 { lock.lock(); defer { lock.unlock() }; return last }
    }

    @Test func notificationLatencyFromCommitToWakeupInAnotherProcess() throws {
        let group = "group.com.example.latency"
        var options = SharedContainer.Options()
        options.store.durability = .noSync
        let container = try dir.container(group, options: options)
        let clock = CommitClock()
        container.store.addObserver(clock)
        _ = try History.attach(to: container)
        let defaults = try container.defaults()
        let count = 200
        let observer = try BackgroundProcess.helper(["notify-latency", dir.path, group, String(count)])
        #expect(observer.waitForLine { $0.hasPrefix("ready") } != nil)

        var committedAt: [Int: UInt64] = [:]
        for seq in 1...count {
            try defaults.set(seq, forKey: "seq")
            committedAt[seq] = clock.lastCommit
            usleep(3_000)
        }
        #expect(observer.wait().status == 0)
        var latencies: [Double] = []
        for line in observer.output where line.hasPrefix("seq ") {
            let parts = line.split(separator: " ")
            guard let seq = Int(parts[1]), let wake = UInt64(parts[2]), let commit = committedAt[seq], wake >= commit else { continue }
            latencies.append(Double(wake - commit) / 1000)
        }
        // The observer never misses the fact of a change: it saw the last one.
        #expect(observer.output.contains { $0.hasPrefix("seq \(count) ") })
        #expect(latencies.count >= count / 2)
        latencies.sort()
        let p50 = latencies[latencies.count / 2]
        let p99 = latencies[min(latencies.count - 1, latencies.count * 99 / 100)]
        #if DEBUG
        let build = "debug"
        #else
        let build = "release"
        #endif
        print(String(format: "notification latency, commit to wakeup in another process: p50 %.0f µs, p99 %.0f µs, max %.0f µs",
                     p50, p99, latencies.last ?? 0) + " (\(latencies.count) wakes for \(count) commits, \(build) build)")
    }
}
