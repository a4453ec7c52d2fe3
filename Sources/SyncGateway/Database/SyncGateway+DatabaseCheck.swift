#if PostgreSQL
import Foundation
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import SyncKitPostgres
import SyncWire

extension SyncGateway {
    /// Checks that the database is ready for this gateway, and that this gateway's login is no more
    /// than a member of `kvsync_gateway`; returns the revocation log's cursor. The gateway never
    /// creates or migrates the schema: that is the owner's step (`kvtool sync setup`).
    /// A connection to the database, tried again with a backoff while nothing answers there, for up
    /// to ``Options/databaseTimeout`` (``Options/waitingForDatabase`` is told once). Other errors (a
    /// refused login, a database that does not exist) are thrown at once.
    func connectWaiting(_ target: GroupDatabase) async throws -> PostgresConnection {
        let database = target.url
        let timeout = options.databaseTimeout
        let deadline = ContinuousClock.now + timeout
        let endpoint = database.shownEndpoint
        // Told once: when an attempt fails for want of an answer, or after a second without one.
        let told = Locked(false)
        let tell = { @Sendable [options] (reason: String?) in
            guard told.withLock({ let first = !$0; $0 = true; return first }) else { return }
            options.waitingForDatabase?("waiting for the database at \(endpoint)\(reason.map { " (\($0))" } ?? ""), for up to \(ReplicationError.seconds(timeout))…")
        }
        let notice = Task {
            try await Task.sleep(for: .seconds(1))
            tell(nil)
        }
        defer { notice.cancel() }
        var backoff: Duration = .milliseconds(100)
        var attempt: Duration = .seconds(2)
        while true {
            let limit = max(min(attempt, deadline - ContinuousClock.now), .milliseconds(100))
            let reason: String
            do {
                return try await connectToDatabase(target, id: 2, timeout: limit)
            } catch is DeadlinePassed {
                reason = "no answer"
            } catch let error as ReplicationError {
                throw error
            } catch {
                guard let unreachable = unreachableReason(error) else { throw error }
                reason = unreachable
            }
            let left = deadline - ContinuousClock.now
            guard left > .zero else {
                throw ReplicationError.unreachable("cannot reach the database at \(endpoint) within \(ReplicationError.seconds(timeout)): \(reason); check that PostgreSQL is running there and that --database is right (--database-timeout waits longer)")
            }
            tell(reason)
            try await Task.sleep(for: min(backoff, left))
            backoff = min(backoff * 2, .seconds(2))
            attempt = min(attempt * 2, .seconds(15))
        }
    }

    func checkDatabase(_ target: GroupDatabase) async throws -> Int64 {
        let logger = options.logger
        let allowPrivileged = options.allowPrivilegedRole
        do {
            // A connection of its own, with a deadline: the pool would try a refused login again and
            // again, and the gateway would hang at its start instead of saying why it cannot.
            let connection = try await connectWaiting(target)
            defer { Task { try? await connection.close() } }
            return try await connection.withTransaction(logger: logger) { connection in
                try await ServerStatements.checkSchemaExists(connection, logger: logger)
                let role = try await ServerStatements.gatewayLogin(connection, logger: logger)
                guard let (name, superuser, bypassRLS, createRole, member, owner, others) = role else {
                    throw ReplicationError.server("cannot read this login's role")
                }
                guard member || superuser else {
                    throw ReplicationError.server("the login \(name) is not a member of \(ServerStatements.gatewayRole): run kvtool sync setup --database OWNER_URL --gateway-login \(name)")
                }
                var privileges: [String] = []
                if superuser { privileges.append("a superuser") }
                if bypassRLS { privileges.append("allowed to bypass row-level security") }
                if createRole { privileges.append("allowed to create roles") }
                if owner { privileges.append("the owner of the kvsync tables") }
                if !others.isEmpty && !superuser { privileges.append("a member of \(others)") }
                if !privileges.isEmpty && !allowPrivileged {
                    throw ReplicationError.server("the login \(name) is \(privileges.joined(separator: ", ")): a gateway logs in as a role that is only a member of \(ServerStatements.gatewayRole) (kvtool sync setup --gateway-login NAME makes one), or pass --allow-privileged-role")
                }
                try await ServerStatements.assumeGatewayRole(connection, local: true, logger: logger)
                try await ServerStatements.checkSchema(connection, logger: logger)
                return try await ServerStatements.revocationCursor(connection, logger: logger)
            }
        } catch let error as ReplicationError {
            throw error
        } catch let error as PostgresTransactionError {
            if let inner = error.closureError as? ReplicationError { throw inner }
            throw ReplicationError.server("cannot use the database \(database): \(ServerStatements.describe(error))")
        } catch {
            throw ReplicationError.server("cannot use the database \(database): \(ServerStatements.describe(error))")
        }
    }
}
#endif
