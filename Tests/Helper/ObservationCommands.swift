// kvtest-helper commands for the observation and async-access tests.
import Foundation
import KVStore
import SyncKit

/// Runs the observation commands; returns `false` for a command it does not know.
func observationCommand(_ command: String, root: String, group: String, rest: [String]) throws -> Bool {
    switch command {
    case "counter-writer":
        // counter-writer ROOT GROUP COUNT: with history, puts 1…COUNT at key "n" of the collection
        // "counter", each after the observer acknowledged the previous one (key "n" of "acks" reaching
        // it). Prints "done".
        let container = try SharedContainer(groupIdentifier: group, root: root)
        _ = try History.attach(to: container)
        let counter = try container.store.collection("counter", key: String.self, value: Int.self)
        let acks = try container.store.collection("acks", key: String.self, value: Int.self)
        let deadline = Date().addingTimeInterval(120)
        for i in 1...Int(rest[0])! {
            try container.store.write(author: "writer") { tx in try counter.put(i, forKey: "n", in: tx) }
            while try container.store.read({ tx in try acks.get("n", in: tx) ?? 0 }) < i {
                guard Date() < deadline else { fail("no acknowledgement of \(i)") }
                usleep(500)
            }
        }
        say("done")
    case "put-int":
        // put-int ROOT GROUP COLLECTION KEY VALUE [TIMES]: with history, puts VALUE at KEY, TIMES times
        // (default 1), one transaction each. Prints "ok".
        let container = try SharedContainer(groupIdentifier: group, root: root)
        _ = try History.attach(to: container)
        let collection = try container.store.collection(rest[0], key: String.self, value: Int.self)
        for _ in 0..<(rest.count > 3 ? Int(rest[3])! : 1) {
            try container.store.write(author: "helper") { tx in try collection.put(Int(rest[2])!, forKey: rest[1], in: tx) }
        }
        say("ok")
    case "put-int-plain":
        // put-int-plain ROOT GROUP COLLECTION KEY VALUE: puts VALUE at KEY without history, posting the
        // change notification with a CommitNotifier. Prints "ok".
        let container = try SharedContainer(groupIdentifier: group, root: root)
        container.store.addObserver(CommitNotifier(notifier: ChangeNotifier(container: container)))
        let collection = try container.store.collection(rest[0], key: String.self, value: Int.self)
        try collection.put(Int(rest[2])!, forKey: rest[1])
        say("ok")
    case "observe-latency":
        // observe-latency ROOT GROUP COUNT: observes key "n" of "counter" with a ValueObservation;
        // prints "ready" after the first value, then "value V NS" for each new value (NS: monotonic
        // time of arrival) until V reaches COUNT.
        let container = try SharedContainer(groupIdentifier: group, root: root)
        let counter = try container.store.collection("counter", key: String.self, value: Int.self)
        let count = Int(rest[0])!
        let observation = ValueObservation.tracking { tx in try counter.get("n", in: tx) ?? 0 }.removeDuplicates()
        let done = DispatchSemaphore(value: 0)
        Task {
            var first = true
            do {
                for try await value in observation.values(in: container) {
                    let now = monotonicNanoseconds()
                    if first { say("ready"); first = false } else { say("value \(value) \(now)") }
                    if value >= count { break }
                }
            } catch {
                say("error \(error)")
            }
            done.signal()
        }
        done.wait()
    case "hold-write-until":
        // hold-write-until ROOT GROUP RELEASE_PATH: begins a write transaction (putting 1 at "held" in the
        // collection "held"), prints "writing", and commits once RELEASE_PATH exists (at most 600 s).
        let container = try SharedContainer(groupIdentifier: group, root: root)
        let held = try container.store.collection("held", key: String.self, value: Int.self)
        let deadline = Date().addingTimeInterval(600)
        try container.store.write { tx in
            try held.put(1, forKey: "held", in: tx)
            say("writing")
            while !FileManager.default.fileExists(atPath: rest[0]), Date() < deadline { usleep(2_000) }
        }
        say("committed")
    default:
        return false
    }
    return true
}
