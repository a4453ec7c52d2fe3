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

    @Test(.blockingWork) func everyConsumerSeesTheWritersHistoryInOrderWithoutGapsEvenWhenKilled() throws {
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

    /// Tokens and clocks carry on across writers of different processes: a process whose previous
    /// commit was its own reuses what it left, and after another process's commit it reads them again.
    /// Three writers at once (this process and two helpers) leave one run of tokens, each used once,
    /// and stamps that rise with the tokens, whichever way their commits interleaved.
    @Test(.blockingWork) func writersOfSeveralProcessesShareOneRunOfTokensAndOneClock() throws {
        let group = "group.com.example.writers"
        let container = try dir.container(group)
        let history = try History.attach(to: container)
        let events = try container.store.collection("events", key: Int.self, value: Int.self)
        try history.enable(.collection("events"))
        for i in 0..<3 { try container.store.write(author: "test") { tx in try events.put(i, forKey: 100_000 + i, in: tx) } }
        // Another process commits 4 transactions (1 + 2 + 3 + 1 entries) between two of ours.
        let other = try BackgroundProcess.helper(["history-writer", dir.path, group, "4"])
        #expect(other.wait().status == 0)
        #expect(other.output.last == "done 10")
        try container.store.write(author: "test") { tx in try events.put(3, forKey: 100_003, in: tx) }
        #expect(try history.currentToken() == ChangeToken(rawValue: 11))

        // Then three writers at once.
        let count = 100
        let helpers = try (0..<2).map { _ in try BackgroundProcess.helper(["history-writer", dir.path, group, String(count)]) }
        for i in 0..<count {
            try container.store.write(author: "test") { tx in try events.put(i, forKey: 200_000 + i, in: tx) }
        }
        for helper in helpers { #expect(helper.wait().status == 0) }
        let perHelper = (0..<count).reduce(0) { $0 + 1 + $1 % 3 }
        let expected = 11 + count + 2 * perHelper
        guard case .changes(let transactions, let next) = try history.changes(since: .zero) else { Issue.record("expired"); return }
        let entries = transactions.flatMap(\.entries)
        #expect(entries.map(\.token.rawValue) == Array(1...UInt64(expected)))
        #expect(next == ChangeToken(rawValue: UInt64(expected)))
        #expect(transactions.count == 3 + 4 + 1 + count + 2 * count)
        // One stamp a transaction, each after the one before.
        let stamps = transactions.compactMap { $0.entries.first?.clock }
        #expect(stamps.count == transactions.count)
        #expect(zip(stamps, stamps.dropFirst()).allSatisfy { $0 < $1 })
        #expect(transactions.allSatisfy { t in t.entries.allSatisfy { $0.clock == t.entries.first?.clock } })
        let switches = zip(transactions, transactions.dropFirst()).count { $0.author != $1.author }
        print("history writers: \(transactions.count) transactions, the author changed \(switches) times between consecutive ones")
        #expect(try history.checkIntegrity().isEmpty)
    }

    @Test(.blockingWork) func aStoppedObserverNeverBlocksTheWriterAndStillLearnsOfTheChange() throws {
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

    @Test(.blockingWork) func notificationLatencyFromCommitToWakeupInAnotherProcess() throws {
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
