#if PostgreSQL
import Foundation
import HTTPServerKit
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import PostgresNIO
import SyncKitPostgres

extension SyncGateway {
    /// How long a readiness check's answer is reused: a load balancer (or anyone: the checks take no
    /// credential) asking often costs the database one query a second at most.
    static let readinessReuse: Duration = .seconds(1)
    /// How long a readiness check waits for the database before it answers 503.
    static let readinessTimeout: Duration = .seconds(2)

    /// `GET /healthz`, `GET /readyz` and (on the metrics listener) `GET /metrics`; `nil` for any
    /// other request. They take no credential and no rate: a load balancer's checks must not be
    /// refused by the limits devices are held to.
    func operationsAnswer(method: HTTPMethod, endpoint: GatewayMetrics.Endpoint, metrics served: Bool) async -> GatewayResponse? {
        guard let operations = endpoint.source.operations, operations != .metrics || served else { return nil }
        guard method == .GET || method == .HEAD else {
            return GatewayResponse(status: .methodNotAllowed, body: ByteBuffer(string: "\(endpoint.label) takes GET\n"), outcome: .refused(.protocol))
        }
        switch operations {
        case .healthz:
            return GatewayResponse(status: .ok, body: ByteBuffer(string: "ok\n"), contentType: "text/plain; charset=utf-8")
        case .readyz:
            // Not ready is an answer, not an error: counted by its status, and not logged (a load
            // balancer asks every few seconds).
            let (ready, reason) = await readiness()
            // The devices' address says why in general terms only: the database's own words (its
            // address, say) are for the metrics address, which only operators reach.
            let line = !ready && !served && reason.hasPrefix("not ready: the database")
                ? "not ready: the database does not answer, or its schema is not this gateway's" : reason
            return GatewayResponse(status: ready ? .ok : .serviceUnavailable, body: ByteBuffer(string: line + "\n"),
                                   contentType: "text/plain; charset=utf-8")
        case .metrics:
            let (inFlight, draining) = state.withLock { state in (state.open.values.count { !$0.idle }, state.draining) }
            let text = metrics.exposition(connections: connections.count, inFlight: inFlight, liveStreams: hub.count, draining: draining,
                                          databaseUp: link.status.up)
            return GatewayResponse(status: .ok, body: ByteBuffer(string: text),
                                   contentType: "text/plain; version=0.0.4; charset=utf-8")
        }
    }

    /// Whether the gateway takes requests: not draining, the database answers, and its schema is this
    /// gateway's version; with one line saying so, or why not.
    func readiness() async -> (Bool, String) {
        if state.withLock({ $0.draining }) { return (false, "draining: the gateway is shutting down") }
        // The watch's answer, at once, while the database is unreachable (and no query waits on it).
        let status = link.status
        if !status.up {
            return (false, "not ready: the database at \(database.shownEndpoint) is unreachable (\(status.reason)), for \(Self.seconds(.now - status.since))")
        }
        await readinessChecks.acquire()
        defer { readinessChecks.release() }
        // A check's answer is reused for a second, unless the watch changed its mind since.
        if let (at, changes, result) = readinessCache.withLock({ $0 }), changes == status.changes,
           ContinuousClock.now - at < Self.readinessReuse {
            return result
        }
        let result: (Bool, String)
        do {
            let (client, logger) = (try pool(), options.logger)
            try await withDeadline(Self.readinessTimeout, what: "the database", typedTimeout: true) {
                try await client.withTransaction(logger: logger) { connection in
                    try await ServerStatements.assumeGatewayRole(connection, local: true, logger: logger)
                    try await ServerStatements.checkSchema(connection, logger: logger)
                }
            }
            result = (true, "ready")
        } catch {
            let inner = (error as? PostgresTransactionError)?.closureError ?? error
            if inner is DeadlinePassed {
                result = (false, "not ready: the database at \(database.shownEndpoint) does not answer within \(Self.seconds(Self.readinessTimeout))")
            } else if Self.isConnectionFailure(inner) || inner is DatabaseLink.Unreachable {
                result = (false, "not ready: the database at \(database.shownEndpoint) is unreachable (\(Self.unreachableWords(inner)))")
            } else {
                result = (false, "not ready: the database: \(ServerStatements.describe(inner))")
            }
        }
        readinessCache.withLock { $0 = (.now, status.changes, result) }
        if state.withLock({ $0.draining }) { return (false, "draining: the gateway is shutting down") }
        return result
    }
}
#endif
