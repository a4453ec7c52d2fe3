#if PostgreSQL
import Crypto
import Foundation
import KVStore
import Logging
import PostgresNIO
import SyncWire

/// A device credential as the database keeps it: never the token itself, only its SHA-256.
public struct SyncCredential: Hashable, Sendable, Codable {
    public var id: Int64
    /// The group it syncs, and the only one it can read or write.
    public var group: String
    /// The name it was issued to (for `kvtool sync token list` and `revoke --device`), if any.
    public var device: String?
    /// A read-only credential pulls and never pushes.
    public var readOnly: Bool
    public var createdAt: Date
    public var expiresAt: Date?
    public var revokedAt: Date?
}
#endif
