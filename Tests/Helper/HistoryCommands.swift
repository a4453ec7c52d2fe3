// kvtest-helper commands for the SyncKit history and notification tests.
import Foundation
import KVStore
import SyncKit

/// Monotonic nanoseconds, comparable between processes on one machine (CLOCK_MONOTONIC).
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// Writes a line to stdout at once (a killed process loses nothing it printed).
func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// Runs the history commands; returns `false` for a command it does not know.
func historyCommand(_ command: String, root: String, group: String, rest: [String]) throws -> Bool {
    switch command {
    case "open-close-stores":
        // open-close-stores ROOT GROUP-PREFIX COUNT: COUNT containers (GROUP-PREFIX.0, .1, …), each with a
        // history attached and enabled, a write and an async write, then closed. Prints "alive A
        // descriptors D residentKiB K": how many of those stores (or their histories) are still alive,
        // and how many more descriptors and KiB of resident set this process holds than after the first.
        func openDescriptors() -> Int { (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? -1 }
        func residentKiB() -> Int {
            let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
            let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
            return Int(line.split(separator: " ").dropFirst().first ?? "") ?? -1
        }
        final class WeakStore { weak var store: Store?; weak var history: History? }
        func useAndClose(_ index: Int) throws -> WeakStore {
            let container = try SharedContainer(groupIdentifier: "\(group).\(index)", root: root)
            let history = try History.attach(to: container)
            try history.enable(.collection("notes"))
            let notes = try container.store.collection("notes", key: Int.self, value: String.self)
            try notes.put("sync", forKey: 1)
            let done = DispatchSemaphore(value: 0)
            let failure = Locked<(any Error)?>(nil)
            Task {
                do { try await container.store.write { tx in try notes.put("async", forKey: 2, in: tx) } } catch { failure.withLock { $0 = error } }
                done.signal()
            }
            done.wait()
            if let error = failure.withLock({ $0 }) { throw error }
            container.close()
            let weak = WeakStore()
            (weak.store, weak.history) = (container.store, history)
            return weak
        }
        _ = try useAndClose(0)
        let (descriptors, resident) = (openDescriptors(), residentKiB())
        let count = Int(rest[0]) ?? 0
        let stores = try (1...max(1, count)).map(useAndClose)
        // An async write's block lets go of its store on the writer queue's thread just after the write
        // returns: wait for that (at most 20 s), rather than count at one instant.
        let deadline = Date().addingTimeInterval(20)
        while stores.contains(where: { $0.store != nil || $0.history != nil }), Date() < deadline { usleep(20_000) }
        let alive = stores.count { $0.store != nil || $0.history != nil }
        say("alive \(alive) descriptors \(openDescriptors() - descriptors) residentKiB \(residentKiB() - resident)")
    case "history-writer":
        // history-writer ROOT GROUP COUNT: COUNT transactions by author "writer", transaction i putting
        // 1 + i % 3 entries into the history-enabled collection "events". Prints "done LAST_TOKEN".
        let container = try SharedContainer(groupIdentifier: group, root: root)
        let history = try History.attach(to: container)
        let events = try container.store.collection("events", key: Int.self, value: Int.self)
        try history.enable(.collection("events"))
        for i in 0..<Int(rest[0])! {
            try container.store.write(author: "writer") { tx in
                for j in 0...(i % 3) { try events.put(i, forKey: i * 10 + j, in: tx) }
            }
        }
        say("done \(try history.currentToken())")
    case "history-consumer":
        // history-consumer ROOT GROUP NAME EXPECTED: reads and acknowledges history as the consumer
        // NAME until it has acknowledged token EXPECTED, checking that tokens are consecutive. Prints
        // "start T", "acked T" after each acknowledgement, and "end T gaps G duplicates D".
        let container = try SharedContainer(groupIdentifier: group, root: root)
        let history = try History.attach(to: container)
        let consumer = try history.consumer(named: rest[0], author: rest[0], startingAt: .oldest)
        let expected = ChangeToken(rawValue: UInt64(rest[1])!)
        var last = try consumer.token()
        var (gaps, duplicates) = (0, 0)
        say("start \(last)")
        while last < expected {
            guard case .changes(let transactions, let next) = try consumer.pendingChanges(
                matching: HistoryFilter(transactionLimit: 20)) else {
                throw SyncError.unknownConsumer("\(rest[0]) expired")
            }
            for entry in transactions.flatMap(\.entries) {
                if entry.token.rawValue > last.rawValue + 1 { gaps += 1 }
                if entry.token <= last { duplicates += 1 }
                last = entry.token
            }
            last = next
            if transactions.isEmpty { usleep(2_000); continue }
            try consumer.acknowledge(through: next)
            say("acked \(next)")
        }
        say("end \(last) gaps \(gaps) duplicates \(duplicates)")
    case "notify-latency":
        // notify-latency ROOT GROUP COUNT: observes the container's change notifications; on each wake
        // reads the defaults key "seq" and prints "seq N WAKE_NS", until N reaches COUNT.
        let container = try SharedContainer(groupIdentifier: group, root: root)
        let notifier = ChangeNotifier(directory: container.notifyDirectory)
        let count = Int(rest[0])!
        let wakes = try notifier.notifications()
        let defaults = try container.defaults()
        say("ready")
        let done = DispatchSemaphore(value: 0)
        Task {
            for await _ in wakes {
                let wake = monotonicNanoseconds()
                let seq = (try? defaults.integer(forKey: "seq")) ?? 0
                say("seq \(seq) \(wake)")
                if seq >= count { break }
            }
            done.signal()
        }
        done.wait()
    default:
        return false
    }
    return true
}
