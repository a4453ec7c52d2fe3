#if PostgreSQL
import Crypto
import Foundation
import KVStore
import Logging
import PostgresNIO
import SyncWire

/// Device credentials for a sync gateway (``SyncCredential``), issued, listed and revoked by the
/// database's owner on a direct `postgres://` URL.
///
/// A token is `kvs1_` and 43 characters of base64url: 256 random bits from the system's generator. It
/// is shown once, when it is issued; the database stores its SHA-256, and the gateway looks a
/// presented token up by that hash and compares the stored hash with its own in constant time. A
/// revoked or expired token is refused at its next request.
public enum SyncTokens {
    /// Every token starts with this (so that a leaked one is recognisable, as with GitHub's `ghp_`).
    public static let prefix = CredentialText.tokenPrefix

    /// Issues a credential for `group`; returns the token, which nothing keeps, its row, and the
    /// credentials of the same device name that were live (neither revoked nor expired) when it was
    /// issued, oldest first: a second credential for one device is issued (a rotation issues the new one
    /// before it revokes the old), and the caller says so (`kvtool sync token issue` warns, naming them).
    ///
    /// - Throws: ``ReplicationError/invalidCredential(_:)`` for a bad group, device name or lifetime;
    ///   ``ReplicationError/server(_:)`` when the database cannot be reached.
    public static func issue(on server: ServerURL, group: String, device: String? = nil, readOnly: Bool = false,
                             expiresIn: Duration? = nil, logger: Logger = quietLogger)
        async throws -> (token: String, credential: SyncCredential, alsoLive: [SyncCredential]) {
        do { _ = try GroupIdentifier(group) } catch { throw ReplicationError.invalidCredential("the group '\(group)' is not a group identifier: \(error)") }
        if let device { try checkDeviceName(device) }
        if let expiresIn, expiresIn <= .zero || expiresIn > .seconds(100 * 365 * 86_400) {
            throw ReplicationError.invalidCredential("the lifetime must be from 1 second to 100 years")
        }
        var generator = SystemRandomNumberGenerator()
        let random = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let token = prefix + Base64.url(random)
        let seconds = expiresIn.map { Double($0.components.seconds) + Double($0.components.attoseconds) / 1e18 }
        let (credential, alsoLive) = try await withOwner(server, logger: logger) { connection in
            var live: [SyncCredential] = []
            if let device {
                let rows = try await connection.query("""
                    SELECT \(unescaped: columns) FROM kvsync_tokens
                    WHERE group_id = \(group) AND device = \(device) AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
                    ORDER BY id
                    """, logger: logger)
                for try await row in rows.decode(Row.self) { live.append(Self.credential(row)) }
            }
            var issued: SyncCredential?
            let rows = try await connection.query("""
                INSERT INTO kvsync_tokens (group_id, device, hash, read_only, expires_at)
                VALUES (\(group), \(device), \(ByteBuffer(bytes: hash(token))), \(readOnly),
                        CASE WHEN \(seconds)::float8 IS NULL THEN NULL ELSE now() + make_interval(secs => \(seconds)) END)
                RETURNING \(unescaped: columns)
                """, logger: logger)
            for try await row in rows.decode(Row.self) { issued = Self.credential(row) }
            guard let issued else { throw ReplicationError.server("the database returned no credential") }
            return (issued, live)
        }
        return (token, credential, alsoLive)
    }

    /// The credentials of `group` (every group's if `nil`), oldest first.
    public static func list(on server: ServerURL, group: String? = nil, logger: Logger = quietLogger) async throws -> [SyncCredential] {
        try await withOwner(server, logger: logger) { connection in
            var found: [SyncCredential] = []
            let rows = try await connection.query("""
                SELECT \(unescaped: columns) FROM kvsync_tokens WHERE \(group)::text IS NULL OR group_id = \(group) ORDER BY id
                """, logger: logger)
            for try await row in rows.decode(Row.self) { found.append(Self.credential(row)) }
            return found
        }
    }

    /// Revokes the credential `id`; returns how many were revoked now (0: none, or revoked before).
    public static func revoke(on server: ServerURL, id: Int64, logger: Logger = quietLogger) async throws -> Int {
        try await withOwner(server, logger: logger) { connection in
            try await count(connection.query("""
                UPDATE kvsync_tokens SET revoked_at = now() WHERE id = \(id) AND revoked_at IS NULL RETURNING id
                """, logger: logger))
        }
    }

    /// Revokes every credential issued to `device` in `group`; returns how many were revoked now.
    public static func revoke(on server: ServerURL, device: String, group: String, logger: Logger = quietLogger) async throws -> Int {
        try await withOwner(server, logger: logger) { connection in
            try await count(connection.query("""
                UPDATE kvsync_tokens SET revoked_at = now()
                WHERE group_id = \(group) AND device = \(device) AND revoked_at IS NULL RETURNING id
                """, logger: logger))
        }
    }

    /// The SHA-256 of a token's text: what the database keeps and looks it up by.
    package static func hash(_ token: String) -> [UInt8] {
        Array(SHA256.hash(data: Array(token.utf8)))
    }

    /// Whether `token` has the form of one (`kvs1_` and 43 base64url characters): anything else is
    /// refused before the database is asked.
    package static func isWellFormed(_ token: String) -> Bool { CredentialText.isToken(token) }

    /// Whether `text` has a JWT's form (three base64url parts, at most 8 KiB), as an app's backend
    /// signs for a gateway that accepts them.
    package static func looksLikeJWT(_ text: String) -> Bool { CredentialText.isJWT(text) }

    /// The device id a gateway records the pushes of a token issued without a device name under.
    package static func derivedDevice(credential id: Int64) -> String { JWTClaims.reservedDevicePrefix + String(id) }

    /// Whether a device may present `text` to a gateway: a token's form or a JWT's.
    package static func isPresentable(_ text: String) -> Bool { isWellFormed(text) || looksLikeJWT(text) }

    /// Equal in time that depends only on the lengths.
    package static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        return zip(a, b).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// A device name: 1 to 200 bytes of UTF-8 with no control characters, not starting with
    /// `credential-` (the device ids of tokens issued without a name), and not ending like an install's
    /// id (`#` and 24 hexadecimal digits: `InstallID`), so that no name is another's install.
    static func checkDeviceName(_ device: String) throws {
        guard !device.isEmpty, device.utf8.count <= ServerStatements.maxNameBytes,
              !device.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw ReplicationError.invalidCredential("a device name is 1 to \(ServerStatements.maxNameBytes) bytes with no control characters")
        }
        guard !device.hasPrefix(JWTClaims.reservedDevicePrefix) else {
            throw ReplicationError.invalidCredential("a device name cannot start with \(JWTClaims.reservedDevicePrefix): it names the tokens issued without one")
        }
        guard !InstallID.endsWithPublicID(device) else {
            throw ReplicationError.invalidCredential("a device name cannot end with \(InstallID.separator) and \(InstallID.publicIDLength) hexadecimal digits: that names one install of a device")
        }
    }

    public static let quietLogger = Logger(label: "kvstore.sync", factory: { _ in SwiftLogNoOpLogHandler() })

    private static let columns = "id, group_id, device, read_only, created_at, expires_at, revoked_at"
    private typealias Row = (Int64, String, String?, Bool, Date, Date?, Date?)

    private static func credential(_ row: Row) -> SyncCredential {
        SyncCredential(id: row.0, group: row.1, device: row.2, readOnly: row.3, createdAt: row.4, expiresAt: row.5, revokedAt: row.6)
    }

    private static func count(_ rows: PostgresRowSequence) async throws -> Int {
        var count = 0
        for try await _ in rows.decode(Int64.self) { count += 1 }
        return count
    }

    /// Runs `body` on a connection of the database's owner, with the schema migrated and the gateway's
    /// role granted what it needs (an administrator may have created it since the migration), only if it
    /// lacks something (``ServerSchema/grantsNeeded``).
    static func withOwner<R: Sendable>(_ server: ServerURL, logger: Logger,
                                               _ body: @escaping @Sendable (PostgresConnection) async throws -> R) async throws -> R {
        let connection = try await ServerConnection.connect(server, logger: logger, maxValueBytes: 1 << 20)
        return try await connection.closing {
            try await connection.migrate()
            return try await connection.mapErrors {
                var needed = false
                for try await (found) in try await connection.connection.query(PostgresQuery(unsafeSQL: ServerSchema.grantsNeeded), logger: logger)
                    .decode(Bool.self) {
                    needed = found
                }
                if needed { try await connection.connection.query(PostgresQuery(unsafeSQL: ServerSchema.grants), logger: logger) }
                return try await body(connection.connection)
            }
        }
    }
}
#endif
