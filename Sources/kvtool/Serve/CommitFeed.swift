#if Serve
import Foundation
import KVStore
import SyncKit

/// The live timeline behind `/api/events`: one thread follows every commit of every process
/// (``CommitFollower``, woken by the container's change notification and looking every 50 ms for
/// commits of processes that post none), and hands each one, as a server-sent event, to every open
/// stream. A stream that falls behind keeps only its newest ``ServeLimits/eventBacklog`` events.
final class CommitFeed: Sendable {
    private struct Subscribers {
        var next = 0
        var continuations: [Int: AsyncStream<String>.Continuation] = [:]
    }

    private let container: SharedContainer
    private let subscribers = Locked(Subscribers())
    /// Whether the thread follows commits: ``stop()`` clears it, and the thread ends within a poll.
    private let following = Locked(false)
    /// Signalled by the thread as it ends.
    private let ended = DispatchSemaphore(value: 0)
    /// Seconds between keep-alive comments on idle streams.
    static let pingInterval: Double = 15

    init(container: SharedContainer) {
        self.container = container
    }

    /// Starts following commits, on a thread of its own.
    func start() throws {
        let follower = try CommitFollower(container: container)
        let text = try HistoryText(store: container.store)
        following.withLock { $0 = true }
        Thread.detachNewThread { [self] in
            var follower = follower
            var text = text
            var lastPing = Date()
            var lastProblem: String?
            defer { ended.signal() }
            while following.withLock({ $0 }) {
                do {
                    let commits = try follower.next().commits
                    if commits.contains(where: { $0.entries.contains { text.catalog[$0.name] == nil && $0.target.kind == .collection } }) {
                        // A collection created since: render its keys through its encoding too.
                        text = try HistoryText(store: container.store)
                    }
                    for commit in commits {
                        broadcast("event: commit\ndata: \(try Output.line(JSONValue(encoding: Self.json(commit, text: text))))\n\n")
                    }
                    lastProblem = nil
                } catch {
                    // Said once, not every 50 ms while it lasts (a co-tenant may have broken the history).
                    let problem = "\(error)".singleLine
                    if problem != lastProblem { broadcast("event: problem\ndata: \(JSONText.quoted(problem))\n\n") }
                    lastProblem = problem
                }
                if Date().timeIntervalSince(lastPing) >= Self.pingInterval {
                    broadcast(": ping\n\n")
                    lastPing = Date()
                }
            }
        }
    }

    /// Stops following commits: the thread ends (within one 50 ms wait), its change-notification
    /// subscription with it, and every open stream finishes.
    func stop() {
        let wasFollowing = following.withLock { following in
            defer { following = false }
            return following
        }
        guard wasFollowing else { return }
        ended.wait()
        for continuation in subscribers.withLock({ Array($0.continuations.values) }) { continuation.finish() }
    }

    /// A stream of events from now on, or `nil` when ``ServeLimits/eventStreams`` are open already.
    func subscribe() -> AsyncStream<String>? {
        let (stream, continuation) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingNewest(ServeLimits.eventBacklog))
        let id: Int? = subscribers.withLock { state in
            guard state.continuations.count < ServeLimits.eventStreams else { return nil }
            state.next += 1
            state.continuations[state.next] = continuation
            return state.next
        }
        guard let id else { return nil }
        continuation.onTermination = { [subscribers] _ in
            _ = subscribers.withLock { $0.continuations.removeValue(forKey: id) }
        }
        return stream
    }

    private func broadcast(_ event: String) {
        for continuation in subscribers.withLock({ Array($0.continuations.values) }) { continuation.yield(event) }
    }

    /// A commit as the page's timeline takes it (the contract of `/api/events`): at most
    /// ``ServeLimits/listing`` of its entries, and how many more there were.
    static func json(_ commit: CommitFollower.Commit, text: HistoryText) -> ServeAnswer.Commit {
        ServeAnswer.Commit(transaction: commit.transactionID, seen: HistoryText.timestamp(commit.seen), history: !commit.entries.isEmpty,
                           entries: commit.entries.prefix(ServeLimits.listing).map(text.json),
                           omitted: max(0, commit.entries.count - ServeLimits.listing))
    }
}
#endif
