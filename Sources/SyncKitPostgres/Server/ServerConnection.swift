#if PostgreSQL
import Foundation
import Logging
import NIOCore
import KVStore
import PostgresNIO
import SyncWire

/// A connection to the replication server, speaking only the fixed statements of ``ServerSchema``.
final class ServerConnection: Sendable {
    let connection: PostgresConnection
    let logger: Logger
    /// A value longer than this is refused without being read into memory.
    let maxValueBytes: Int

    /// Connection ids for postgres-nio's logging.
    private static let lastID = Locked(0)

    /// How long one statement or transaction may take before it is abandoned and the connection
    /// closed (``Replicator/Options/statementTimeout``).
    let operationTimeout: Duration

    /// The statements, on this connection.
    let statements: ServerStatements

    /// Set to now whenever an operation succeeds (a replicator's sign that its server answers).
    let answered: Locked<ContinuousClock.Instant?>?

    /// The wake-ups this connection sends after its pushes commit (``WakeUps``), on itself.
    let wakeUps: WakeUps

    private init(connection: PostgresConnection, logger: Logger, maxValueBytes: Int, operationTimeout: Duration,
                 answered: Locked<ContinuousClock.Instant?>?) {
        self.connection = connection
        self.answered = answered
        statements = ServerStatements(connection: connection, logger: logger, maxValueBytes: maxValueBytes)
        self.logger = logger
        self.maxValueBytes = maxValueBytes
        self.operationTimeout = operationTimeout
        let statements = statements
        wakeUps = WakeUps { group in
            // Bounded as any statement; a wake-up that fails is lost (the gateways' poll finds its push).
            guard !connection.isClosed else { return }
            _ = try? await withDeadline(operationTimeout, what: "the server", onTimeout: { try? await connection.close() }) {
                try await statements.wake(group: group)
            }
        }
    }

    static func connect(_ url: ServerURL, logger: Logger, maxValueBytes: Int,
                        operationTimeout: Duration = defaultOperationTimeout,
                        connectTimeout: Duration = defaultConnectTimeout,
                        answered: Locked<ContinuousClock.Instant?>? = nil) async throws -> ServerConnection {
        do {
            // Each host gets `connectTimeout`, for the whole connect (a server that accepts and then
            // closes while it starts is not waited for); with a host list, the one its
            // target_session_attrs asks for is kept (the primary, after a failover too).
            let (connection, _) = try await url.connectChoosing(id: lastID.withLock { $0 += 1; return $0 }, logger: logger, timeout: connectTimeout)
            return ServerConnection(connection: connection, logger: logger, maxValueBytes: maxValueBytes,
                                    operationTimeout: operationTimeout, answered: answered)
        } catch is DeadlinePassed {
            throw ReplicationError.unreachable(unreachableMessage(url, "no answer within \(connectTimeout)"))
        } catch let error as ReplicationError {
            if case .invalidServerURL = error { throw error }
            throw ReplicationError.server("cannot connect to \(url): \(error)")
        } catch {
            if let reason = unreachableReason(error) { throw ReplicationError.unreachable(unreachableMessage(url, reason)) }
            throw ReplicationError.server("cannot connect to \(url): \(describe(error))")
        }
    }

    /// `cannot reach the sync server at HOST:PORT: REASON; check …`.
    static func unreachableMessage(_ url: ServerURL, _ reason: String) -> String {
        "cannot reach the sync server at \(url.shownEndpoint): \(reason); check that PostgreSQL is running there and that --server is right"
    }

    func close() async {
        await wakeUps.flush()
        try? await connection.close()
    }

    /// Runs `body`, then closes this connection whether it returned or threw: a one-off command's
    /// connection (``SyncTokens``, ``SyncBackend``).
    func closing<R: Sendable>(_ body: () async throws -> R) async throws -> R {
        do {
            let result = try await body()
            await close()
            return result
        } catch {
            await close()
            throw error
        }
    }

    func migrate() async throws {
        try await mapErrors { [self] in try await ServerSchema.migrate(connection, logger: logger) }
    }

    /// Sends one batch in one server transaction; one outcome per change, in order. Once it committed
    /// with a change applied, the group's live devices are woken (``WakeUps``: the push itself no
    /// longer notifies, from `kvsync_push` revision 7).
    func push(group: String, device: String, changes: [OutgoingChange], maxClockSkew: Duration) async throws -> [PushOutcome] {
        let outcomes = try await mapErrors { [statements] in
            try await statements.push(group: group, device: device, changes: changes, maxClockSkew: maxClockSkew)
        }
        if outcomes.contains(where: { if case .applied = $0 { true } else { false } }) { await wakeUps.wake(group) }
        return outcomes
    }

    /// The server's id (``ServerSchema``, version 2).
    func serverID() async throws -> String {
        try await mapErrors { [statements] in try await statements.serverID() }
    }

    func changes(group: String, after cursor: Int64, limit: Int) async throws -> ChangesPage {
        try await mapErrors { [statements] in try await statements.changes(group: group, after: cursor, limit: limit) }
    }

    /// A page of the state after `cursor`, of ``ChangesPage/maxBytes`` at most (as a page of the log):
    /// a resync holds a page of the group at a time, never the whole.
    func statePage(group: String, after cursor: StateCursor?, limit: Int) async throws -> StatePage {
        try await mapErrors { [statements] in
            try await statements.statePage(group: group, after: cursor, limit: limit, maxBytes: ChangesPage.maxBytes)
        }
    }

    func prune(group: String, olderThan age: Duration) async throws -> ServerPruning {
        try await mapErrors { [statements] in try await statements.prune(group: group, olderThan: age) }
    }

    static var maxNameBytes: Int { ServerStatements.maxNameBytes }

    /// How long one statement or transaction may take before it is abandoned and the connection closed.
    static let defaultOperationTimeout: Duration = .seconds(120)

    /// How long connecting (TCP, then PostgreSQL's start-up exchange) may take before it is abandoned.
    static let defaultConnectTimeout: Duration = .seconds(10)

    var isClosed: Bool { connection.isClosed }

    /// Runs `body`, turning PostgreSQL's errors into one-line ``ReplicationError``s. A server that died
    /// mid-statement (`pg_ctl stop -m immediate`) must not leave a replicator waiting forever on a
    /// reply: after `operationTimeout` the operation is abandoned with an error and the connection
    /// closed (the replicator then connects anew).
    func mapErrors<R: Sendable>(_ body: @escaping @Sendable () async throws -> R) async throws -> R {
        guard !connection.isClosed else { throw ReplicationError.server("the connection to the server is closed") }
        let connection = self.connection
        let result = try await withDeadline(operationTimeout, what: "the server", onTimeout: { try? await connection.close() },
                                            abandonWhen: { connection.isClosed ? "the connection to the server closed mid-statement" : nil }) {
            try await Self.mapErrors(body)
        }
        answered?.withLock { $0 = .now }
        return result
    }

    /// Runs `body`, turning PostgreSQL's errors into one-line ``ReplicationError``s.
    static func mapErrors<R>(_ body: () async throws -> R) async throws -> R {
        do {
            return try await body()
        } catch let error as ReplicationError {
            throw error
        } catch let error as PostgresTransactionError {
            if let inner = error.closureError as? ReplicationError { throw inner }
            throw ReplicationError.server(describe(error))
        } catch {
            throw ReplicationError.server(describe(error))
        }
    }
}

/// One line about a PostgreSQL error: the server's message where there is one (PSQLError's own
/// description hides it).
func describe(_ error: any Error) -> String {
    if let error = error as? PostgresTransactionError {
        if let inner = error.closureError { return describe(inner) }
        if let inner = error.commitError { return "COMMIT failed: " + describe(inner) }
        if let inner = error.beginError { return "BEGIN failed: " + describe(inner) }
        return "transaction failed"
    }
    if let error = error as? PSQLError {
        if let message = error.serverInfo?[.message] {
            let code = error.serverInfo?[.sqlState].map { " (SQLSTATE \($0))" } ?? ""
            return message + code
        }
        if let underlying = error.underlying { return "\(error.code): \(underlying)" }
        return "\(error.code)"
    }
    if let error = error as? PostgresDecodingError {
        return "a column of type \(error.postgresType) does not decode as \(error.targetType)"
    }
    return String(describing: error).split(separator: "\n").first.map(String.init) ?? "unknown error"
}

/// Runs `body` in a task of its own and returns what it returns, or throws once `timeout` has passed
/// without waiting for it any longer: a task that ignores cancellation (a connect to a server that went
/// silent, say) cannot hold its caller, as it would in a task group, which waits for all its children.
/// `onTimeout` runs when the deadline wins, and `abandoned` gets what `body` returns after that.
/// Once the deadline (or `abandonWhen`) wins, `body`'s task is cancelled as well: a body that heeds
/// cancellation (a wait for a pool's connection, say) ends instead of holding what it captured
/// (a gateway, its pool) for as long as it waits. The caller's own cancellation is not passed to
/// `body`: a statement already sent runs to its end, as it did before its caller gave up.
/// `typedTimeout`: the deadline throws ``DeadlinePassed`` (for a caller that acts on it), not
/// ``ReplicationError/server(_:)``.
package func withDeadline<R: Sendable>(_ timeout: Duration, what: String, typedTimeout: Bool = false,
                               onTimeout: @escaping @Sendable () async -> Void = {},
                               abandonWhen: @escaping @Sendable () -> String? = { nil },
                               _ body: @escaping @Sendable () async throws -> R,
                               abandoned: @escaping @Sendable (R) async -> Void = { _ in }) async throws -> R {
    try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<R, any Error>) in
        let finished = Locked(false)
        // The body's task, once made; `true` once the deadline won (the body is cancelled when made,
        // should the deadline win first).
        let work = Locked<(task: Task<Void, Never>?, gaveUp: Bool)>((nil, false))
        let giveUp: @Sendable () -> Void = {
            work.withLock { state -> Task<Void, Never>? in
                state.gaveUp = true
                return state.task
            }?.cancel()
        }
        let finish: @Sendable (Result<R, any Error>) -> Bool = { result in
            let first = finished.withLock { done -> Bool in
                defer { done = true }
                return !done
            }
            if first { continuation.resume(with: result) }
            return first
        }
        // Checked every 100 ms: the deadline, and whether to give up sooner (a connection that
        // closed while a statement was out: postgres-nio does not always fail that statement when a
        // server shutting down drops it).
        let timer = Task {
            let deadline = ContinuousClock.now + timeout
            while !Task.isCancelled {
                try? await Task.sleep(for: min(.milliseconds(100), deadline - ContinuousClock.now))
                if Task.isCancelled { return }
                if ContinuousClock.now >= deadline {
                    let passed = DeadlinePassed(description: "no answer from \(what) within \(timeout)")
                    if finish(.failure(typedTimeout ? passed : ReplicationError.server(passed.description))) {
                        giveUp()
                        await onTimeout()
                    }
                    return
                }
                if let reason = abandonWhen() {
                    if finish(.failure(ReplicationError.server(reason))) {
                        giveUp()
                        await onTimeout()
                    }
                    return
                }
            }
        }
        let task = Task {
            do {
                let value = try await body()
                if !finish(.success(value)) { await abandoned(value) }
            } catch {
                _ = finish(.failure(error))
            }
            timer.cancel()
        }
        if work.withLock({ state -> Bool in state.task = task; return state.gaveUp }) { task.cancel() }
    }
}
#endif
