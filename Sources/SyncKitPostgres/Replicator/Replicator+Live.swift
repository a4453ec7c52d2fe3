#if PostgreSQL
import Foundation
import KVStore
import PostgresNIO
import SyncKit

extension Replicator {
    /// Stays live: syncs now, then whenever another device pushes (PostgreSQL `LISTEN/NOTIFY`, a
    /// wake-up only: the change log is what is read), whenever a process of this container commits
    /// (its change notification), whenever a process requests sync (``SyncKit/SyncService``), and at
    /// least every ``Options/pollInterval``. A failed round (the server down, say) is retried after a
    /// backoff that doubles up to ``Options/maximumBackoff``, or at once when a request comes; nothing
    /// is lost meanwhile. Returns when the task is cancelled or `deadline` passes.
    public func run(until deadline: ContinuousClock.Instant? = nil) async throws {
        let wakeup = Wakeup()
        let notifier = ChangeNotifier(container: container)
        let local = try notifier.notifications()
        let requests = try notifier.notifications(SyncService.requestNotification)
        try ownership.setMode(.live)
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                for await _ in local { wakeup.signal() }
            }
            tasks.addTask {
                for await _ in requests { wakeup.signal() }
            }
            tasks.addTask { [self] in
                await listen(wakeup: wakeup)
            }
            tasks.addTask { [self] in
                var backoff = options.minimumBackoff
                while !Task.isCancelled {
                    if let deadline, ContinuousClock.now >= deadline { break }
                    var wait = options.pollInterval
                    do {
                        try await sync()
                        backoff = options.minimumBackoff
                    } catch {
                        wait = backoff
                        backoff = min(backoff * 2, options.maximumBackoff)
                    }
                    if let deadline { wait = min(wait, deadline - ContinuousClock.now) }
                    if wait > .zero { await wakeup.wait(timeout: wait) }
                }
            }
            // The sync loop ends on the deadline or cancellation; the other two then stop too.
            _ = try await tasks.next()
            tasks.cancelAll()
        }
    }

    /// Listens on the server's channel on a connection of its own, reconnecting with a backoff, and
    /// signals `wakeup` for every notification of this group (and after every reconnection, in case
    /// one was missed while disconnected).
    private func listen(wakeup: Wakeup) async {
        let url: ServerURL
        switch endpoint {
        case .gateway(let gateway, let token):
            await follow(gateway, token: token, wakeup: wakeup)
            return
        case .database(let database): url = database
        case nil: return
        }
        var backoff = options.minimumBackoff
        while !Task.isCancelled {
            do {
                let server = try await ServerConnection.connect(url, logger: options.logger, maxValueBytes: options.maxValueBytes,
                                                            operationTimeout: options.statementTimeout, connectTimeout: options.connectTimeout)
                // Closed, and the close awaited, however listening ends.
                var failure: (any Error)?
                do {
                    try await server.connection.listen(on: ServerSchema.channel) { notifications in
                        wakeup.signal()
                        backoff = options.minimumBackoff
                        for try await notification in notifications where notification.payload == group {
                            wakeup.signal()
                        }
                    }
                } catch {
                    failure = error
                }
                await server.close()
                if let failure { throw failure }
            } catch {
                if Task.isCancelled { return }
            }
            try? await Task.sleep(for: backoff)
            backoff = min(backoff * 2, options.maximumBackoff)
        }
    }
}

extension Replicator {
    /// Follows the gateway's live stream, connecting again with a backoff, and signals `wakeup` for
    /// every commit of this group (and when the stream opens).
    private func follow(_ gateway: SyncGatewayURL, token: String, wakeup: Wakeup) async {
        var backoff = options.minimumBackoff
        while !Task.isCancelled {
            let opened = Locked(false)
            do {
                let connection = try GatewayConnection(url: gateway, token: token, group: group, maxValueBytes: options.maxValueBytes,
                                                       operationTimeout: options.statementTimeout, connectTimeout: options.connectTimeout)
                try await connection.live {
                    opened.withLock { $0 = true }
                    wakeup.signal()
                }
            } catch {
                if Task.isCancelled { return }
            }
            // A stream that opened and then ended (the gateway restarted, say) reconnects soon.
            if opened.withLock({ $0 }) { backoff = options.minimumBackoff }
            try? await Task.sleep(for: backoff)
            backoff = min(backoff * 2, options.maximumBackoff)
        }
    }
}

#endif
