import Foundation
import KVStore
import Observation
import SyncKit
import Testing
import TestSupport

/// Typed observation across real processes: ``ValueObservation`` and ``ObservedValue``. Serialized,
/// because the cancellation test counts this process's observation threads and watches.
@Suite(.serialized) struct ValueObservationTests {
    let dir = TemporaryDirectory()

    /// A value that is not `Equatable`: every read of it is delivered, so a delivery shows a read.
    struct Box: Sendable { var n: Int? }

    /// The container, with history enabled for `counter`, `acks` and `other`.
    func historyContainer(_ group: String) throws -> (SharedContainer, KVCollection<String, Int>, KVCollection<String, Int>) {
        let container = try dir.container(group)
        let history = try History.attach(to: container)
        let counter = try container.store.collection("counter", key: String.self, value: Int.self)
        let acks = try container.store.collection("acks", key: String.self, value: Int.self)
        _ = try container.store.collection("other", key: String.self, value: Int.self)
        for name in ["counter", "acks", "other"] { try history.enable(.collection(name)) }
        return (container, counter, acks)
    }

    @Test(.blockingWork) func anotherProcessesWritesArriveOnceEachInOrderWithoutAMiss() async throws {
        let group = "group.com.example.observe"
        let (container, counter, acks) = try historyContainer(group)
        let count = 40
        let observation = ValueObservation.tracking { tx in try counter.get("n", in: tx) }.removeDuplicates()
        let path = dir.path
        let result = try await withTimeout(seconds: 120) { () async throws -> ([Int?], BackgroundProcess?) in
            var seen: [Int?] = []
            var writer: BackgroundProcess?
            for try await value in observation.values(in: container) {
                seen.append(value)
                if writer == nil { writer = try BackgroundProcess.helper(["counter-writer", path, group, String(count)]) }
                // The acknowledgement is a local commit to a collection the value did not read.
                if let value { try await container.store.write(author: "observer") { tx in try acks.put(value, forKey: "n", in: tx) } }
                if value == count { break }
            }
            return (seen, writer)
        }
        #expect(result?.1?.wait().status == 0)
        #expect(result?.0 == [nil] + (1...count).map { $0 })
    }

    @Test(.blockingWork) func writesToCollectionsTheValueDidNotReadDoNotWakeIt() async throws {
        let group = "group.com.example.unobserved"
        let (container, counter, _) = try historyContainer(group)
        let other = try container.store.collection("other", key: String.self, value: Int.self)
        let observation = ValueObservation.tracking { tx in Box(n: try counter.get("n", in: tx)) }
        let path = dir.path
        let seen = try await withTimeout(seconds: 60) { () async throws -> [Int?] in
            var seen: [Int?] = []
            for try await box in observation.values(in: container) {
                seen.append(box.n)
                if seen.count == 2 { break }
                // Local and other-process writes to "other", then time to (wrongly) deliver them.
                for i in 0..<3 { try other.put(i, forKey: "local\(i)") }
                #expect(try helper(["put-int", path, group, "other", "remote", "1", "5"]).status == 0)
                try await Task.sleep(for: .milliseconds(300))
                #expect(try helper(["put-int", path, group, "counter", "n", "7"]).status == 0)
            }
            return seen
        }
        #expect(seen == [nil, 7])
    }

    @Test(.blockingWork) func withoutHistoryEveryNotificationRunsTheReadAgain() async throws {
        let group = "group.com.example.nohistory"
        let container = try dir.container(group)
        let counter = try container.store.collection("counter", key: String.self, value: Int.self)
        let observation = ValueObservation.tracking { tx in Box(n: try counter.get("n", in: tx)) }
        let path = dir.path
        let seen = try await withTimeout(seconds: 60) { () async throws -> [Int?] in
            var seen: [Int?] = []
            for try await box in observation.values(in: container) {
                seen.append(box.n)
                switch seen.count {
                case 1: #expect(try helper(["put-int-plain", path, group, "other", "k", "1"]).status == 0)
                case 2: #expect(try helper(["put-int-plain", path, group, "counter", "n", "7"]).status == 0)
                default: return seen
                }
            }
            return seen
        }
        // Nothing tells which collection the first commit changed, so the read ran again.
        #expect(seen == [nil, nil, 7])
    }

    @Test func localCommitsAreSeenWithoutANotifier() async throws {
        let store = try dir.store()
        let scores = try store.collection("scores", key: String.self, value: Int.self)
        let observation = ValueObservation.tracking { tx in try scores.get("alice", in: tx) ?? 0 }
        let seen = try await withTimeout(seconds: 60) { () async throws -> [Int] in
            var seen: [Int] = []
            for try await value in observation.values(in: store, notifier: nil) {
                seen.append(value)
                if value == 3 { break }
                try await store.write { tx in try scores.put(value + 1, forKey: "alice", in: tx) }
            }
            return seen
        }
        #expect(seen == [0, 1, 2, 3])
    }

    /// The values `observation` of `store` delivers until one is `last`; after the n-th, `commit(n)` runs.
    func delivered(_ observation: ValueObservation<Int>, in store: Store, until last: Int,
                   commit: @escaping @Sendable (Int) throws -> Void) async throws -> [Int]? {
        try await withTimeout(seconds: 60) { () async throws -> [Int] in
            var seen: [Int] = []
            for try await value in observation.values(in: store, notifier: nil) {
                seen.append(value)
                if value == last { break }
                try commit(seen.count)
            }
            return seen
        }
    }

    /// Duplicate removal is asked for: `tracking` alone delivers every read, an equal one too (here a
    /// commit of bob's score, which runs the read of alice's again); with ``ValueObservation/removeDuplicates()``
    /// a read equal to the last value delivered is not delivered.
    @Test func equalValuesAreDeliveredUnlessDuplicatesAreRemoved() async throws {
        let store = try dir.store()
        let scores = try store.collection("scores", key: String.self, value: Int.self)
        let alice = ValueObservation.tracking { tx in try scores.get("alice", in: tx) ?? 0 }
        let every = try await delivered(alice, in: store, until: 1) { count in
            try scores.put(1, forKey: count == 1 ? "bob" : "alice")
        }
        #expect(every == [0, 0, 1])
        let distinct = try await delivered(alice.removeDuplicates(), in: store, until: 2) { _ in
            try scores.put(10, forKey: "bob")
            try scores.put(2, forKey: "alice")
        }
        #expect(distinct == [1, 2])
    }

    @Test func cancellingTheTaskEndsTheThreadAndClosesTheWatch() async throws {
        let group = "group.com.example.cancel"
        let (container, counter, _) = try historyContainer(group)
        let notify = container.notifyDirectory
        // Threads of the tests before (a loop left with break) may still be winding down: wait for them.
        #expect(await ObservationResources.wait(until: { $0 == (0, 0) }, of: container.store, watching: notify))
        let observation = ValueObservation.tracking { tx in try counter.get("n", in: tx) ?? 0 }
        let tasks = (0..<3).map { _ in
            Task {
                for try await _ in observation.values(in: container) {}
            }
        }
        #expect(await ObservationResources.wait(until: { $0 == (3, 3) }, of: container.store, watching: notify))
        try counter.put(1, forKey: "n")
        for task in tasks { task.cancel() }
        for task in tasks { _ = await task.result }
        #expect(await ObservationResources.wait(until: { $0 == (0, 0) }, of: container.store, watching: notify))
        try counter.put(2, forKey: "n")
        // Breaking out of the loop ends observation too.
        for try await _ in observation.values(in: container) { break }
        #expect(await ObservationResources.wait(until: { $0 == (0, 0) }, of: container.store, watching: notify))
    }

    @Test func anObservableModelFollowsAnotherProcessesWrites() async throws {
        let group = "group.com.example.model"
        let (container, counter, _) = try historyContainer(group)
        try counter.put(1, forKey: "n")
        let model = try ObservedValue(.tracking { tx in try counter.get("n", in: tx) ?? 0 }.removeDuplicates(), in: container)
        #expect(model.value == 1)
        let changed = DispatchSemaphore(value: 0)
        withObservationTracking { _ = model.value } onChange: { changed.signal() }
        let dir = dir
        #expect(try await offPool { try helper(["put-int", dir.path, group, "counter", "n", "8"]) }.status == 0)
        // Waited for off the cooperative pool: blocking one of its two threads here for up to a
        // minute held back every other suite's timers (a replication test's 5 s deadline fired
        // after 62 s beside it).
        let woke = try await offPool { changed.wait(timeout: .now() + 60) == .success }
        #expect(woke)
        let deadline = ContinuousClock.now + .seconds(60)
        while model.value != 8, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
        #expect(model.value == 8)
        #expect(model.error == nil)
        model.cancel()
    }

    @Test(.blockingWork) func commitToNewValueLatencyInAnotherProcess() async throws {
        let group = "group.com.example.observelatency"
        var options = SharedContainer.Options()
        options.store.durability = .noSync
        let container = try dir.container(group, options: options)
        let clock = HistoryProcessTests.CommitClock()
        container.store.addObserver(clock)
        container.store.addObserver(CommitNotifier(notifier: ChangeNotifier(container: container)))
        let counter = try container.store.collection("counter", key: String.self, value: Int.self)
        let count = 200
        let observer = try BackgroundProcess.helper(["observe-latency", dir.path, group, String(count)])
        #expect(observer.waitForLine { $0.hasPrefix("ready") } != nil)
        var committedAt: [Int: UInt64] = [:]
        for n in 1...count {
            try counter.put(n, forKey: "n")
            committedAt[n] = clock.lastCommit
            usleep(5_000)
        }
        #expect(observer.wait().status == 0)
        var latencies: [Double] = []
        var values: [Int] = []
        for line in observer.output where line.hasPrefix("value ") {
            let parts = line.split(separator: " ")
            guard let n = Int(parts[1]), let seen = UInt64(parts[2]) else { continue }
            values.append(n)
            if let commit = committedAt[n], seen >= commit { latencies.append(Double(seen - commit) / 1000) }
        }
        #expect(values.last == count)
        #expect(values == values.sorted() && Set(values).count == values.count)
        #expect(latencies.count >= count / 2)
        latencies.sort()
        guard !latencies.isEmpty else { return }
        let p50 = latencies[latencies.count / 2]
        let p99 = latencies[min(latencies.count - 1, latencies.count * 99 / 100)]
        #if DEBUG
        let build = "debug"
        #else
        let build = "release"
        #endif
        print(String(format: "[perf] ValueObservation, commit to new value in another process: median %.0f µs, p99 %.0f µs, max %.0f µs",
                     p50, p99, latencies.last ?? 0)
              + " (\(latencies.count) values for \(count) commits 5 ms apart, \(ProcessInfo.processInfo.activeProcessorCount) cores, \(build) build)")
    }
}

/// This process's observations of one store and the inotify descriptors watching one directory.
enum ObservationResources {
    /// The observations of `store` running (another suite's observations running meanwhile are not
    /// counted; they have no thread each since issue 48, ObservationThreadTests) and the inotify
    /// watches on `directory`.
    static func count(of store: Store, watching directory: String) -> (threads: Int, watches: Int) {
        let threads = ObservationCount.running(forStoreAt: store.directory)
        var info = stat()
        guard stat(directory, &info) == 0 else { return (threads, -1) }
        let inode = "ino:" + String(info.st_ino, radix: 16)
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fdinfo")) ?? []
        let watches = fds.filter { fd in
            let text = (try? String(contentsOfFile: "/proc/self/fdinfo/\(fd)", encoding: .utf8)) ?? ""
            return text.split(separator: "\n").contains { $0.hasPrefix("inotify ") && $0.split(separator: " ").contains(Substring(inode)) }
        }.count
        return (threads, watches)
    }

    /// Polls until `condition` holds (at most 20 s).
    static func wait(until condition: ((threads: Int, watches: Int)) -> Bool, of store: Store, watching directory: String) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if condition(count(of: store, watching: directory)) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        let last = count(of: store, watching: directory)
        Issue.record("observation threads and watches: \(last)")
        return false
    }
}

/// Runs `body`; after `seconds`, cancels it, records an issue and returns `nil`.
func withTimeout<T: Sendable>(seconds: Double, _ body: @escaping @Sendable () async throws -> T) async throws -> T? {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await body() }
        group.addTask { try await Task.sleep(for: .seconds(seconds)); return nil }
        let first = try await group.next()!
        group.cancelAll()
        if first == nil { Issue.record("timed out after \(seconds) s") }
        return first
    }
}
