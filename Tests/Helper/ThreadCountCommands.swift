// kvtest-helper commands that count this process's threads while many observations or async sync
// requests run: in a process of their own, so that no other test's threads are counted with them.
import Foundation
import KVStore
import SyncKit
import TestSupport

/// Runs `body` on a task and waits for it (the helper's commands are synchronous).
private func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let result = Locked<Result<T, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        let outcome: Result<T, any Error>
        do { outcome = .success(try await body()) } catch { outcome = .failure(error) }
        result.withLock { $0 = outcome }
        done.signal()
    }
    guard done.wait(timeout: .now() + 120) == .success else { fail("no answer within 120 s") }
    return try result.withLock { $0! }.get()
}

/// Polls `condition` until it holds (at most 60 s).
private func eventually(_ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(60)
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return condition()
}

/// Runs the thread-count commands; returns `false` for a command it does not know.
func threadCountCommand(_ command: String, root: String, group: String, rest: [String]) throws -> Bool {
    switch command {
    case "observe-many":
        // observe-many ROOT GROUP N: N observations of one value, each live (a commit reaches them
        // all). Prints "threads BEFORE DURING".
        let container = try SharedContainer(groupIdentifier: group, root: root)
        let history = try History.attach(to: container)
        let counter = try container.store.collection("counter", key: String.self, value: Int.self)
        try history.enable(.collection("counter"))
        let count = Int(rest[0])!
        let line = try blocking { () async throws -> String in
            let observation = ValueObservation.tracking { tx in try counter.get("n", in: tx) ?? 0 }
            let before = processThreadCount()
            let seen = Locked([Int: Int]())
            let tasks = (0..<count).map { index in
                Task { for try await value in observation.values(in: container) { seen.withLock { $0[index] = value } } }
            }
            defer { for task in tasks { task.cancel() } }
            guard await eventually({ seen.withLock { $0.count } == count }) else { fail("not every observation delivered") }
            try counter.put(1, forKey: "n")
            guard await eventually({ seen.withLock { $0.values.allSatisfy { $0 == 1 } } }) else { fail("a commit did not reach them all") }
            return "threads \(before) \(processThreadCount())"
        }
        say(line)
    case "request-many":
        // request-many ROOT GROUP N: N async sync requests of 3 s each with no owner and no agent,
        // the threads sampled while they wait. Prints "threads BEFORE MOST NOT_WITHIN_DEADLINE".
        let container = try SharedContainer(groupIdentifier: group, root: root)
        let service = try SyncService(container: container)
        _ = try History.attach(to: container).consumer(named: SyncService.consumerName)
        let count = Int(rest[0])!
        let line = try blocking { () async throws -> String in
            let before = processThreadCount()
            let most = Locked(0)
            let late = await withTaskGroup(of: Bool.self) { group in
                for _ in 0..<count {
                    group.addTask {
                        guard case .notWithinDeadline? = try? await service.request(within: .seconds(3), startingAgent: false) else { return false }
                        return true
                    }
                }
                for _ in 0..<10 {
                    try? await Task.sleep(for: .milliseconds(150))
                    let now = processThreadCount()
                    most.withLock { $0 = max($0, now) }
                }
                return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            return "threads \(before) \(most.withLock { $0 }) \(late)"
        }
        say(line)
    default:
        return false
    }
    return true
}
