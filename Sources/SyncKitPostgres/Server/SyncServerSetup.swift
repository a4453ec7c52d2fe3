#if PostgreSQL
import Foundation
import KVStore
import Logging
import PostgresNIO

/// The database owner's step before any gateway serves devices: the schema created or migrated, the
/// role `kvsync_gateway` (which owns nothing and bypasses no row-level security) created and granted
/// what a gateway's transactions need, a login for the gateway that is a member of that role and of
/// nothing else, and the server's clock bound. From schema version 8, also the role `kvsync_backend`
/// (an app's backend: it reads the groups granted to its login and writes to them through the
/// server-write functions) and, if asked, a login for it. The two roles are never granted to each
/// other, and neither login may be a member of the other's role. `kvtool sync setup` runs it; it is
/// safe to run again.
///
/// ```swift
/// let report = try await SyncServerSetup.prepare(on: ServerURL("postgres://owner@db/kv"), gatewayLogin: "kvsync_gateway_login")
/// // then: kvtool sync gateway --database postgres://kvsync_gateway_login@db/kv
/// ```
public enum SyncServerSetup {
    /// What ``prepare(on:gatewayLogin:gatewayPassword:backendLogin:backendPassword:maxClockSkew:logger:)`` found and did.
    public struct Report: Sendable, Equatable {
        /// The schema's version now.
        public var schemaVersion: Int
        /// The gateway's login, if one was asked for, and whether it was created now (else granted).
        public var gatewayLogin: String?
        public var createdLogin: Bool
        /// The server's clock bound, in milliseconds (a push's bound is the lower of its caller's and this).
        public var maxClockSkewMilliseconds: Int64
        /// The backend's login, if one was asked for, and whether it was created now (else granted).
        public var backendLogin: String? = nil
        public var createdBackendLogin: Bool = false
    }

    /// Prepares the database at `owner` (a connection as the schema's owner, which may create roles).
    ///
    /// - Parameters:
    ///   - gatewayLogin: a login role for gateways: created as a member of `kvsync_gateway` (with
    ///     `gatewayPassword`, if given), or, if it exists and is not privileged, granted that role.
    ///   - backendLogin: a login role for an app's backend, made the same way a member of
    ///     `kvsync_backend`; it reads and writes no group until the owner grants it one
    ///     (``SyncBackendGrants``, `kvtool sync backend grant`).
    ///   - maxClockSkew: the server's clock bound, from 0 to a year (unchanged if `nil`; 60 s at first).
    /// - Throws: ``ReplicationError/invalidCredential(_:)`` for a login name that is not a plain
    ///   identifier, one that is privileged, or one that is a member of the other role;
    ///   ``ReplicationError/server(_:)`` naming the step that failed.
    @discardableResult
    public static func prepare(on owner: ServerURL, gatewayLogin: String? = nil, gatewayPassword: String? = nil,
                               backendLogin: String? = nil, backendPassword: String? = nil,
                               maxClockSkew: Duration? = nil, logger: Logger = SyncTokens.quietLogger) async throws -> Report {
        if let gatewayLogin { try checkName(gatewayLogin, of: "gateway") }
        if let backendLogin { try checkName(backendLogin, of: "backend") }
        if let gatewayLogin, gatewayLogin == backendLogin {
            throw ReplicationError.invalidCredential("the gateway's and the backend's logins must be two roles: a gateway must never call the backend's functions")
        }
        if let maxClockSkew, maxClockSkew < .zero || maxClockSkew > .seconds(31_536_000) {
            throw ReplicationError.invalidCredential("the clock bound must be from 0 to 31536000 seconds")
        }
        return try await SyncTokens.withOwner(owner, logger: logger) { connection in
            // The roles the gateway's and the backend's sessions run as (the migration made them if it could).
            try await ensureRole(ServerSchema.gatewayRole, grants: ServerSchema.grants, on: connection, logger: logger)
            if backendLogin != nil { try await ensureRole(ServerSchema.backendRole, grants: nil, on: connection, logger: logger) }
            var roleLinked = false
            for try await (linked) in try await connection.query("""
                SELECT EXISTS (SELECT FROM pg_roles g, pg_roles b WHERE g.rolname = \(ServerSchema.gatewayRole) AND b.rolname = \(ServerSchema.backendRole)
                               AND (pg_has_role(g.oid, b.oid, 'MEMBER') OR pg_has_role(b.oid, g.oid, 'MEMBER')))
                """, logger: logger).decode(Bool.self) {
                roleLinked = linked
            }
            guard !roleLinked else {
                throw ReplicationError.server("the roles \(ServerSchema.gatewayRole) and \(ServerSchema.backendRole) are granted to one another: an administrator revokes that (REVOKE ... FROM ...), then this again")
            }
            // The gateway's policies restricted to its role, the backend's policy and grants.
            try await connection.query(PostgresQuery(unsafeSQL: ServerSchema.backendGrants), logger: logger)
            var created = false
            if let gatewayLogin {
                created = try await grantLogin(gatewayLogin, password: gatewayPassword, role: ServerSchema.gatewayRole,
                                               never: ServerSchema.backendRole, of: "gateway", on: connection, logger: logger)
            }
            var createdBackend = false
            if let backendLogin {
                createdBackend = try await grantLogin(backendLogin, password: backendPassword, role: ServerSchema.backendRole,
                                                      never: ServerSchema.gatewayRole, of: "backend", on: connection, logger: logger)
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
            return Report(schemaVersion: version, gatewayLogin: gatewayLogin, createdLogin: created, maxClockSkewMilliseconds: skew,
                          backendLogin: backendLogin, createdBackendLogin: createdBackend)
        }
    }

    /// A login's name is a plain identifier of its own (never one of the roles, nor `pg_…`).
    static func checkName(_ login: String, of what: String) throws {
        guard login.utf8.count <= 63, let first = login.utf8.first, first == UInt8(ascii: "_") || (0x61...0x7A).contains(first),
              login.utf8.allSatisfy({ $0 == UInt8(ascii: "_") || (0x61...0x7A).contains($0) || (0x30...0x39).contains($0) }) else {
            throw ReplicationError.invalidCredential("a \(what) login is 1 to 63 lower-case letters, digits and underscores, starting with a letter or an underscore")
        }
        guard login != ServerSchema.gatewayRole, login != ServerSchema.backendRole, !login.hasPrefix("pg_") else {
            throw ReplicationError.invalidCredential("the \(what)'s login needs a name of its own (not \(ServerSchema.gatewayRole) or \(ServerSchema.backendRole), nor pg_…)")
        }
    }

    /// Creates `role` (NOLOGIN) if it is missing, and runs `grants` when it had to.
    private static func ensureRole(_ role: String, grants: String?, on connection: PostgresConnection, logger: Logger) async throws {
        var exists = false
        for try await (found) in try await connection.query("SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = \(role))", logger: logger)
            .decode(Bool.self) {
            exists = found
        }
        guard !exists else { return }
        do {
            try await connection.query(PostgresQuery(unsafeSQL: "CREATE ROLE \(role) NOLOGIN"), logger: logger)
            if let grants { try await connection.query(PostgresQuery(unsafeSQL: grants), logger: logger) }
        } catch {
            throw ReplicationError.server("this login cannot create the role \(role) (\(describe(error))): an administrator runs CREATE ROLE \(role) NOLOGIN, then this again")
        }
    }

    /// Makes `login` a member of `role`: created if missing, else granted when it is not privileged
    /// nor a member of `never` (the other role). Whether it was created.
    private static func grantLogin(_ login: String, password: String?, role: String, never other: String, of what: String,
                                   on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        var found: (Bool, Bool, Bool, Bool, Bool)?
        for try await row in try await connection.query("""
            SELECT r.rolsuper, r.rolbypassrls, r.rolcreaterole,
                   EXISTS (SELECT FROM pg_class c WHERE c.relname IN ('kvsync_schema', 'kvsync_tokens', 'kvsync_changes')
                           AND pg_has_role(r.oid, c.relowner, 'MEMBER')),
                   EXISTS (SELECT FROM pg_roles o WHERE o.rolname = \(other) AND pg_has_role(r.oid, o.oid, 'MEMBER'))
            FROM pg_roles r WHERE r.rolname = \(login)
            """, logger: logger).decode((Bool, Bool, Bool, Bool, Bool).self) {
            found = row
        }
        guard let (superuser, bypassRLS, createRole, owner, otherMember) = found else {
            if let password {
                try await execute(format: "CREATE ROLE %I LOGIN PASSWORD %L IN ROLE %I", [login, password, role], on: connection, logger: logger)
            } else {
                try await execute(format: "CREATE ROLE %I LOGIN IN ROLE %I", [login, role], on: connection, logger: logger)
            }
            return true
        }
        guard !superuser, !bypassRLS, !createRole, !owner else {
            throw ReplicationError.invalidCredential("the role \(login) is privileged (a superuser, allowed to bypass row-level security or create roles, or the tables' owner): a \(what)'s login must not be")
        }
        guard !otherMember else {
            throw ReplicationError.invalidCredential("the role \(login) is a member of \(other): a \(what)'s login must not be (the gateway never calls the backend's functions, and the backend never reads as a gateway)")
        }
        try await execute(format: "GRANT %I TO %I", [role, login], on: connection, logger: logger)
        if let password {
            try await execute(format: "ALTER ROLE %I LOGIN PASSWORD %L", [login, password], on: connection, logger: logger)
        }
        return false
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
