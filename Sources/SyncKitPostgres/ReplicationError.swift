#if PostgreSQL
import KVStore

/// Why replication failed. Each description is one line that names the problem.
public enum ReplicationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The server URL cannot be used.
    case invalidServerURL(String, reason: String)
    /// The server could not be reached, or a statement failed there. Nothing was lost: the changes
    /// stay pending in the local history, and the next attempt starts over.
    case server(String)
    /// A row in the server's tables is not something a replicator writes (a bad kind, key, value or
    /// clock). The whole pull was refused: the local store is as it was.
    case malformedServerRow(sequence: Int64, reason: String)
    /// The server's schema is newer than this library knows.
    case serverSchemaTooNew(found: Int, supported: Int)
    /// `target` is not declared for replication in this store (`kvtool sync enable`).
    case notDeclared(Mutation.Target)
    /// `target` cannot replicate as asked.
    case unsupportedTarget(Mutation.Target, reason: String)
    /// The store's replication state (`_sync.*`) holds something a replicator never writes.
    case corruptState(String)

    public var description: String {
        switch self {
        case .invalidServerURL(let url, let reason): "invalid server URL '\(url)': \(reason)"
        case .server(let message): "replication server: \(message)"
        case .malformedServerRow(let sequence, let reason):
            "refused the server's change \(sequence): \(reason); nothing was applied"
        case .serverSchemaTooNew(let found, let supported):
            "the server's schema is version \(found); this library knows versions up to \(supported)"
        case .notDeclared(let target): "\(target) is not replicated (kvtool sync enable)"
        case .unsupportedTarget(let target, let reason): "\(target) cannot replicate: \(reason)"
        case .corruptState(let message): "corrupt replication state: \(message)"
        }
    }
}
#endif
