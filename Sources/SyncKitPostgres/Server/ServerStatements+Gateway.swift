#if PostgreSQL
import Foundation
import Logging
import NIOCore
import PostgresNIO
import SyncWire

/// The statements only a sync gateway runs: its login's check at start, its probe, taking the
/// gateway's role, and scoping a transaction to a credential's group and device. They live here, with
/// every other statement of the server's schema, so that the SQL the server side runs is read, and
/// changed with the schema, in one place (`Sources/SyncKitPostgres/Server`).
extension ServerStatements {
    /// The gateway's login as PostgreSQL sees it, read at the gateway's start: its name, whether it is
    /// a superuser, may bypass row-level security, may create roles, is a member of ``gatewayRole``,
    /// owns the kvsync tables, and the other roles it is a member of (comma-separated, or empty).
    package static func gatewayLogin(_ connection: PostgresConnection, logger: Logger) async throws
        -> (name: String, superuser: Bool, bypassRLS: Bool, createRole: Bool, member: Bool, owner: Bool, others: String)? {
        var role: (String, Bool, Bool, Bool, Bool, Bool, String)?
        for try await row in try await connection.query("""
            SELECT r.rolname, r.rolsuper, r.rolbypassrls, r.rolcreaterole,
                   coalesce(pg_has_role(current_user, (SELECT g.oid FROM pg_roles g WHERE g.rolname = \(gatewayRole)), 'MEMBER'), false),
                   EXISTS (SELECT FROM pg_class c WHERE c.relname IN ('kvsync_schema', 'kvsync_tokens', 'kvsync_changes')
                           AND pg_has_role(current_user, c.relowner, 'MEMBER')),
                   coalesce((SELECT string_agg(g.rolname, ', ' ORDER BY g.rolname) FROM pg_roles g
                             WHERE g.rolname <> \(gatewayRole) AND g.oid <> r.oid
                               AND pg_has_role(current_user, g.oid, 'MEMBER')), '')
            FROM pg_roles r WHERE r.rolname = current_user
            """, logger: logger).decode((String, Bool, Bool, Bool, Bool, Bool, String).self) {
            role = row
        }
        return role
    }

    /// Runs as ``gatewayRole`` from here on: to the end of the transaction (`local`), or for the rest
    /// of the session (a connection of the gateway's own, such as the revocation sweep's).
    package static func assumeGatewayRole(_ connection: PostgresConnection, local: Bool, logger: Logger) async throws {
        if local {
            try await connection.query("SELECT set_config('role', \(gatewayRole), true)", logger: logger)
        } else {
            _ = try await connection.query("SELECT set_config('role', \(gatewayRole), false)", logger: logger)
        }
    }

    /// The smallest statement that proves the database answers (the gateway's watch).
    package static func probe(_ connection: PostgresConnection, logger: Logger) async throws {
        _ = try await connection.query("SELECT 1", logger: logger)
    }

    /// Scopes the transaction to a verified credential's group and device (`device` empty: none), and
    /// whether it is read-only, as ``gatewayRole`` from here on.
    package static func scope(group: String, device: String?, readOnly: Bool, on connection: PostgresConnection,
                              logger: Logger) async throws {
        try await connection.query("""
            SELECT set_config('\(unescaped: ServerSetting.group.rawValue)', \(group), true),
                   set_config('\(unescaped: ServerSetting.device.rawValue)', \(device ?? ""), true),
                   set_config('\(unescaped: ServerSetting.readOnly.rawValue)', \(readOnly ? "on" : "off"), true),
                   set_config('role', \(gatewayRole), true)
            """, logger: logger)
    }

    /// The credential whose SHA-256 is `hash`, as `kvsync_authenticate` finds it, with the transaction
    /// scoped to its group and device (its name, with `publicID` appended when given and when the
    /// result fits the protocol's limit: ``InstallID/device(named:publicID:)`` in SQL) and running as
    /// ``gatewayRole`` from here on; `nil` when no credential has that hash. The caller checks the
    /// hash (in constant time), whether it expired or was revoked, and the scoped device.
    package static func authenticate(_ hash: [UInt8], publicID: String?, on connection: PostgresConnection, logger: Logger) async throws
        -> (id: Int64, group: String, device: String?, readOnly: Bool, hash: ByteBuffer, expired: Bool, revoked: Bool, expiresAt: Date?,
            scopedDevice: String)? {
        var found: (Int64, String, String?, Bool, ByteBuffer, Bool, Bool, Date?, String)?
        let rows = try await connection.query("""
            SELECT a.id, a.group_id, a.device, a.read_only, a.hash, a.expired, a.revoked, a.expires_at,
                   set_config('\(unescaped: ServerSetting.group.rawValue)', a.group_id, true),
                   set_config('\(unescaped: ServerSetting.device.rawValue)', CASE
                       WHEN \(publicID)::text IS NOT NULL
                            AND octet_length(coalesce(a.device, 'credential-' || a.id)) <= \(InstallID.maxNameBytesWithInstall)
                       THEN coalesce(a.device, 'credential-' || a.id) || \(InstallID.separator) || \(publicID)::text
                       ELSE coalesce(a.device, 'credential-' || a.id) END, true),
                   set_config('\(unescaped: ServerSetting.readOnly.rawValue)', CASE WHEN a.read_only THEN 'on' ELSE 'off' END, true),
                   set_config('role', \(gatewayRole), true)
            FROM kvsync_authenticate(\(ByteBuffer(bytes: hash))) a
            """, logger: logger)
        for try await row in rows.decode((Int64, String, String?, Bool, ByteBuffer, Bool, Bool, Date?, String, String, String, String).self) {
            found = (row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.9)
        }
        return found
    }
}
#endif
