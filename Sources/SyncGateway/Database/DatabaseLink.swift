#if PostgreSQL
import Foundation
import KVStore
import Logging
import PostgresNIO

/// The gateway's link to its database: the pool of connections requests (and the revocation sweep,
/// the wake-ups and the poll of live groups) lease, and whether the database answers, as a connection
/// of the gateway's own finds (``SyncGateway``'s watch probes it every ``SyncGateway/probeInterval``;
/// the same connection carries the database's `LISTEN`). So a database costs the gateway the pool's
/// connections and that one.
///
/// While the database is unreachable, requests are answered 503 at once, in a line of their own words,
/// without waiting for the pool: postgres-nio's pool keeps a request waiting while it fails to connect,
/// for 60 s before it gives up on it (its circuit breaker), then fails new requests at once until one
/// of its attempts succeeds, and it tries again less and less often (after a minute's outage, every ten
/// seconds or more). So when the database becomes unreachable the pool is replaced: the old one is shut
/// down (the requests waiting in it fail at once, its connections close), and the new one starts
/// afresh when the database answers again.
final class DatabaseLink: Sendable {
    /// Whether the database answers, and since when.
    struct Status: Sendable {
        var up = true
        /// Why it does not, in a few words ("connection refused").
        var reason = ""
        var since = ContinuousClock.now
        /// How many times `up` changed: an answer reused across a change is not reused.
        var changes = 0
    }

    /// A request refused because the database is unreachable: nothing was asked of it.
    struct Unreachable: Error {
        var reason: String
    }

    /// A pool, run until it is retired (or the gateway ends).
    final class Pool: Sendable {
        let client: PostgresClient
        let retirement: AsyncStream<Void>
        let retire: AsyncStream<Void>.Continuation

        init(_ configuration: PostgresClient.Configuration, logger: Logger) {
            client = PostgresClient(configuration: configuration, backgroundLogger: logger)
            (retirement, retire) = AsyncStream.makeStream(of: Void.self)
        }
    }

    /// The host new pools connect to (a host list's read-write one, ``point(at:configuration:)``), and
    /// their configuration.
    private let target: Locked<(host: String?, configuration: PostgresClient.Configuration)>
    private let logger: Logger
    private let state: Locked<(status: Status, pool: Pool)>
    /// Each new pool, for ``run()`` to run.
    private let pools: AsyncStream<Pool>
    private let started: AsyncStream<Pool>.Continuation

    /// `host`: the host `configuration` connects to, as ``point(at:configuration:)`` names it.
    init(configuration: PostgresClient.Configuration, host: String? = nil, logger: Logger) {
        target = Locked((host, configuration))
        self.logger = logger
        let first = Pool(configuration, logger: logger)
        state = Locked((Status(), first))
        (pools, started) = AsyncStream.makeStream(of: Pool.self)
        started.yield(first)
    }

    /// The pool requests lease connections from now.
    var client: PostgresClient { state.withLock { $0.pool.client } }

    var status: Status { state.withLock { $0.status } }

    /// Records that the database does not answer, for `reason`; on the first such record since it
    /// answered, replaces the pool and returns true.
    func markDown(_ reason: String, now: ContinuousClock.Instant = .now) -> Bool {
        let retired = state.withLock { state -> Pool? in
            guard state.status.up else {
                state.status.reason = reason
                return nil
            }
            state.status = Status(up: false, reason: reason, since: now, changes: state.status.changes + 1)
            return replacePool(&state)
        }
        retired?.retire.finish()
        return retired != nil
    }

    /// Points the pool at `host` (the host list's server the gateway's own connection chose: the
    /// primary moved): if it is not the host the pool connects to, the pool is replaced by one of
    /// `configuration` (requests lease from the new one; the old one's connections close). Returns
    /// whether it was.
    func point(at host: String, configuration: () throws -> PostgresClient.Configuration) rethrows -> Bool {
        guard target.withLock({ $0.host != host }) else { return false }
        let configuration = try configuration()
        target.withLock { $0 = (host, configuration) }
        state.withLock { replacePool(&$0) }.retire.finish()
        return true
    }

    /// Starts a pool of the target's configuration in place of the current one, and returns the current one.
    private func replacePool(_ state: inout (status: Status, pool: Pool)) -> Pool {
        let old = state.pool
        state.pool = Pool(target.withLock { $0.configuration }, logger: logger)
        started.yield(state.pool)
        return old
    }

    /// Records that the database answers; returns how long it did not, if it did not.
    func markUp(now: ContinuousClock.Instant = .now) -> Duration? {
        state.withLock { state -> Duration? in
            guard !state.status.up else { return nil }
            let down = now - state.status.since
            state.status = Status(up: true, reason: "", since: now, changes: state.status.changes + 1)
            return down
        }
    }

    /// Runs each pool until it is retired, until cancelled (then the current one shuts down too).
    func run() async {
        await withDiscardingTaskGroup { group in
            for await pool in pools {
                group.addTask {
                    await withDiscardingTaskGroup { running in
                        running.addTask { await pool.client.run() }
                        for await _ in pool.retirement {}
                        running.cancelAll()
                    }
                }
            }
        }
    }
}
#endif
