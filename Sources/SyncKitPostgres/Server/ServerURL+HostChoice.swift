#if PostgreSQL
import Foundation
import Logging
import PostgresNIO

/// No server of a host list answered as its `target_session_attrs` asks (the primary was killed and
/// the standby is not promoted yet, say): one line naming each host and why it was passed over. Taken
/// for unreachable (``unreachableReason(_:)``): it is waited out, and tried again.
package struct NoServerChosen: Error, CustomStringConvertible {
    package var description: String
}

extension ServerURL {
    /// Connects to the first of ``endpoints`` that answers and whose sessions are what
    /// ``targetSessionAttributes`` asks for, and returns the connection and its host, as libpq does with
    /// a host list: each host gets `timeout` (to connect, and then to answer whether it is in recovery);
    /// one that does not answer, or is not wanted, is passed over for the next.
    ///
    /// Postgres-nio has no host list: every connection of ours to the database goes through here (a
    /// device's, the gateway's own), and the gateway points its pool at the host chosen.
    ///
    /// - Throws: with one host and `any`, what connecting to it throws (as before host lists);
    ///   otherwise the first error that is not a failure to reach a host (a refused login), or
    ///   ``NoServerChosen``.
    package func connectChoosing(id: Int, logger: Logger, timeout: Duration) async throws -> (connection: PostgresConnection, endpoint: Endpoint) {
        if endpoints.count == 1 && targetSessionAttributes == .any {
            return (try await connect(to: endpoint, id: id, logger: logger, timeout: timeout), endpoint)
        }
        if targetSessionAttributes == .preferStandby {
            do {
                return try await choose(.standby, id: id, logger: logger, timeout: timeout)
            } catch is NoServerChosen {
                return try await choose(.any, id: id, logger: logger, timeout: timeout)
            }
        }
        return try await choose(targetSessionAttributes, id: id, logger: logger, timeout: timeout)
    }

    private func choose(_ wanted: TargetSessionAttributes, id: Int, logger: Logger, timeout: Duration) async throws -> (connection: PostgresConnection, endpoint: Endpoint) {
        var passedOver: [String] = []
        var refusal: (any Error)?
        for host in endpoints {
            let shown = Self.shown(host)
            do {
                let connection = try await connect(to: host, id: id, logger: logger, timeout: timeout)
                let mismatch: String?
                do {
                    mismatch = try await withDeadline(timeout, what: "the database", typedTimeout: true, onTimeout: { try? await connection.close() }) {
                        try await Self.mismatch(of: connection, wanted: wanted, logger: logger)
                    }
                } catch {
                    try? await connection.close()
                    throw error
                }
                guard let mismatch else { return (connection, host) }
                try? await connection.close()
                passedOver.append("\(shown): \(mismatch)")
            } catch is DeadlinePassed {
                passedOver.append("\(shown): no answer within \(ReplicationError.seconds(timeout))")
            } catch {
                if let reason = unreachableReason(error) {
                    passedOver.append("\(shown): \(reason)")
                } else {
                    refusal = refusal ?? error
                    passedOver.append("\(shown): \(describe(error))")
                }
            }
        }
        if let refusal { throw refusal }
        throw NoServerChosen(description: "none is \(wanted.shown) (\(passedOver.joined(separator: "; ")))")
    }

    private func connect(to host: Endpoint, id: Int, logger: Logger, timeout: Duration) async throws -> PostgresConnection {
        // The TCP connect has its own timeout (5 s: left longer than `timeout`, so that the deadline
        // below, not postgres-nio's error, says when a host does not answer); the start-up exchange
        // after it has none, and a server that accepts and then closes while it starts can leave it
        // waiting for good. So the whole connect is abandoned after `timeout` (and closed if it ever ends).
        let settings = try connectionConfiguration(to: host)
        return try await withDeadline(timeout, what: "the database", typedTimeout: true) {
            try await PostgresConnection.connect(configuration: settings, id: id, logger: logger)
        } abandoned: { late in
            try? await late.close()
        }
    }

    /// Why the server of `connection` is not `wanted`, or nil when it is (libpq asks the same: whether
    /// it is in recovery, and whether its sessions are read-only).
    static func mismatch(of connection: PostgresConnection, wanted: TargetSessionAttributes, logger: Logger) async throws -> String? {
        guard wanted != .any else { return nil }
        let rows = try await connection.query("SELECT pg_is_in_recovery(), current_setting('transaction_read_only') = 'on'", logger: logger)
        var answer: (Bool, Bool)?
        for try await row in rows.decode((Bool, Bool).self) { answer = row }
        guard let (inRecovery, readOnly) = answer else { return "it did not say whether it is in recovery" }
        switch wanted {
        case .readWrite:
            if inRecovery { return "it is in recovery (a standby)" }
            return readOnly ? "its sessions are read-only" : nil
        case .readOnly: return inRecovery || readOnly ? nil : "its sessions are read-write"
        case .primary: return inRecovery ? "it is in recovery (a standby)" : nil
        case .standby, .preferStandby: return inRecovery ? nil : "it is not in recovery (not a standby)"
        case .any: return nil
        }
    }

    /// `HOST:PORT`, or the socket's path.
    package static func shown(_ endpoint: Endpoint) -> String {
        switch endpoint {
        case .tcp(let host, let port): host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        case .unixSocket(let path): path
        }
    }

    /// `H1:P1,H2:P2`: each host, or the socket's path.
    package var shownEndpoint: String {
        endpoints.map(Self.shown).joined(separator: ",")
    }
}

extension ServerURL.TargetSessionAttributes {
    /// `read-write`, in the words of an error.
    var shown: String {
        switch self {
        case .any: "answering"
        case .readWrite: "read-write"
        case .readOnly: "read-only"
        case .primary: "a primary"
        case .standby, .preferStandby: "a standby"
        }
    }
}
#endif
