#if PostgreSQL
import Foundation
import KVStore
import Logging
import PostgresNIO

/// The database owner's step before any gateway serves devices: the schema created or migrated, the
/// role `kvsync_gateway` (which owns nothing and bypasses no row-level security) created and granted
/// what a gateway's transactions need, a login for the gateway that is a member of that role and of
/// nothing else, and the server's clock bound. `kvtool sync setup` runs it; it is safe to run again.
///
/// ```swift
/// let report = try await SyncServerSetup.prepare(on: ServerURL("postgres://owner@db/kv"), gatewayLogin: "kvsync_gateway_login")
/// // then: kvtool sync gateway --database postgres://kvsync_gateway_login@db/kv
/// ```
public enum SyncServerSetup {
    /// What ``prepare(on:gatewayLogin:gatewayPassword:maxClockSkew:logger:)`` found and did.
    public struct Report: Sendable, Equatable {
        /// The schema's version now.
        public var schemaVersion: Int
        /// The gateway's login, if one was asked for, and whether it was created now (else granted).
        public var gatewayLogin: String?
        public var createdLogin: Bool
        /// The server's clock bound, in milliseconds (a push's bound is the lower of its caller's and this).
        public var maxClockSkewMilliseconds: Int64
    }

    /// Prepares the database at `owner` (a connection as the schema's owner, which may create roles).
    ///
    /// - Parameters:
    ///   - gatewayLogin: a login role for gateways: created as a member of `kvsync_gateway` (with
    ///     `gatewayPassword`, if given), or, if it exists and is not privileged, granted that role.
    ///   - maxClockSkew: the server's clock bound, from 0 to a year (unchanged if `nil`; 60 s at first).
    /// - Throws: ``ReplicationError/invalidCredential(_:)`` for a login name that is not a plain
    ///   identifier, or one that is privileged; ``ReplicationError/server(_:)`` naming the step that failed.
    @discardableResult
    public static func prepare(on owner: ServerURL, gatewayLogin: String? = nil, gatewayPassword: String? = nil,
                               maxClockSkew: Duration? = nil, logger: Logger = SyncTokens.quietLogger) async throws -> Report {
        if let gatewayLogin {
            guard gatewayLogin.utf8.count <= 63, let first = gatewayLogin.utf8.first, first == UInt8(ascii: "_") || (0x61...0x7A).contains(first),
                  gatewayLogin.utf8.allSatisfy({ $0 == UInt8(ascii: "_") || (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) }) else {
                throw ReplicationError.invalidCredential("a gateway login is 1 to 63 lower-case letters, digits and underscores, starting with a letter or an underscore")
            }
            guard gatewayLogin != ServerSchema.gatewayRole, !gatewayLogin.hasPrefix("pg_") else {
                throw ReplicationError.invalidCredential("the gateway's login needs a name of its own (not \(ServerSchema.gatewayRole), nor pg_…)")
            }
        }
        if let maxClockSkew, maxClockSkew < .zero || maxClockSkew > .seconds(31_536_000) {
            throw ReplicationError.invalidCredential("the clock bound must be from 0 to 31536000 seconds")
        }
        let role = ServerSchema.gatewayRole
        return try await SyncTokens.withOwner(owner, logger: logger) { connection in
            // The role the gateway's transactions run as (the migration made it if it could).
            var exists = false
            for try await (found) in try await connection.query("SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = \(role))", logger: logger)
                .decode(Bool.self) {
                exists = found
            }
            if !exists {
                do {
                    try await connection.query(PostgresQuery(unsafeSQL: "CREATE ROLE \(role) NOLOGIN"), logger: logger)
                    try await connection.query(PostgresQuery(unsafeSQL: ServerSchema.grants), logger: logger)
                } catch {
                    throw ReplicationError.server("this login cannot create the role \(role) (\(describe(error))): an administrator runs CREATE ROLE \(role) NOLOGIN, then this again")
                }
            }
            var created = false
            if let gatewayLogin {
                var found: (Bool, Bool, Bool, Bool)?
                for try await row in try await connection.query("""
                    SELECT r.rolsuper, r.rolbypassrls, r.rolcreaterole,
                           EXISTS (SELECT FROM pg_class c WHERE c.relname IN ('kvsync_schema', 'kvsync_tokens', 'kvsync_changes')
                                   AND pg_has_role(r.oid, c.relowner, 'MEMBER'))
                    FROM pg_roles r WHERE r.rolname = \(gatewayLogin)
                    """, logger: logger).decode((Bool, Bool, Bool, Bool).self) {
                    found = row
                }
                if let (superuser, bypassRLS, createRole, owner) = found {
                    guard !superuser, !bypassRLS, !createRole, !owner else {
                        throw ReplicationError.invalidCredential("the role \(gatewayLogin) is privileged (a superuser, allowed to bypass row-level security or create roles, or the tables' owner): a gateway's login must not be")
                    }
                    try await execute(format: "GRANT %I TO %I", [role, gatewayLogin], on: connection, logger: logger)
                    if let gatewayPassword {
                        try await execute(format: "ALTER ROLE %I LOGIN PASSWORD %L", [gatewayLogin, gatewayPassword], on: connection, logger: logger)
                    }
                } else {
                    if let gatewayPassword {
                        try await execute(format: "CREATE ROLE %I LOGIN PASSWORD %L IN ROLE %I", [gatewayLogin, gatewayPassword, role],
                                          on: connection, logger: logger)
                    } else {
                        try await execute(format: "CREATE ROLE %I LOGIN IN ROLE %I", [gatewayLogin, role], on: connection, logger: logger)
                    }
                    created = true
                }
            }
            if let maxClockSkew {
                try await connection.query("UPDATE kvsync_schema SET max_clock_skew_ms = \(maxClockSkew.wholeMilliseconds)", logger: logger)
            }
            var version = 0
            var skew: Int64 = 0
            for try await (foundVersion, foundSkew) in try await connection.query(
                "SELECT max(version), max(max_clock_skew_ms) FROM kvsync_schema", logger: logger).decode((Int, Int64).self) {
                (version, skew) = (foundVersion, foundSkew)
            }
            return Report(schemaVersion: version, gatewayLogin: gatewayLogin, createdLogin: created, maxClockSkewMilliseconds: skew)
        }
    }

    /// Runs a statement that names roles: its text is made by the server's `format()` (`%I` quotes
    /// an identifier, `%L` a literal), so that no name or password is ever spliced in here.
    private static func execute(format: String, _ arguments: [String], on connection: PostgresConnection, logger: Logger) async throws {
        var statement: String?
        let query: PostgresQuery
        switch arguments.count {
        case 2: query = "SELECT format(\(format), \(arguments[0]), \(arguments[1]))"
        default: query = "SELECT format(\(format), \(arguments[0]), \(arguments[1]), \(arguments[2]))"
        }
        for try await (text) in try await connection.query(query, logger: logger).decode(String.self) { statement = text }
        guard let statement else { throw ReplicationError.server("the server formatted no statement") }
        try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
    }
}
#endif
