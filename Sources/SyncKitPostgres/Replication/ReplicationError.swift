#if PostgreSQL
import KVStore
import SyncKit

/// Why replication failed. Each description is one line that names the problem.
public enum ReplicationError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The server URL cannot be used.
    case invalidServerURL(String, reason: String)
    /// The server could not be reached, or a statement failed there. Nothing was lost: the changes
    /// stay pending in the local history, and the next attempt starts over.
    case server(String)
    /// The server (the database, or a sync gateway) could not be reached at all: nothing answers
    /// there (refused, timed out, no route, a name that does not resolve). The message says where,
    /// why, and what to check. Nothing was lost, as for ``server(_:)``.
    case unreachable(String)
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
    /// The server refused a push because this device's clock (the stamps of its changes) is further
    /// ahead of the server's clock than the bound: ``Replicator/Options/maxClockSkew``, or the server's
    /// own where its owner set a lower one (`kvtool sync setup --max-clock-skew`), or, through a
    /// gateway, the gateway's. `limit` is the bound that refused it. Nothing was applied; the changes
    /// stay pending, and are sent once the server's clock is within the bound of their stamps.
    case clockAhead(by: Duration, limit: Duration)
    /// The sync gateway refused a push whole: it would break a budget of the server's (changes or
    /// bytes per push, a minute for this device, an hour for its group). `reason` names the first
    /// budget (`changes-per-push`, `device-bytes-per-minute`, …) and `limit` its value; `detail` says,
    /// for every budget it broke, the limit, what the batch came to, and when it fits again. Nothing of
    /// that batch was applied, and its changes stay pending: they are sent once the budget has room
    /// (or, over a push's budget, once the server's owner raises it).
    case pushRefused(reason: String, limit: Int64, detail: String)
    /// This replicator was made without a server (``Replicator/init(container:targets:options:events:)``):
    /// it can only retry quarantined changes.
    case noServer
    /// A credential, group or device name given to issue or present a token cannot be used.
    case invalidCredential(String)
    /// The sync gateway refused this device's credential: missing, not a token, unknown, revoked,
    /// expired, of another group, or read-only for a push. The token itself is never in the message.
    case credentialRefused(String)
    /// The gateway asks this device to wait. `budget` is the gateway's line naming the budget that is
    /// spent (this credential's requests, its live streams, or the failed logins of the address the
    /// request came from, which other clients there may have spent): `nil` from a gateway that did not
    /// say.
    case rateLimited(retryAfter: Duration, budget: String? = nil)
    /// The server refused a push that sends a token this device id sent before with another change:
    /// another container syncs under the same device id. Every container of this release has an id
    /// of its own (a random one on the direct path; through a gateway, the credential's name and the
    /// container's install), so it takes a container of a release before installs (sharing a
    /// credential's name), or one whose replication state was copied with its install id and home.
    /// Nothing was applied, and the changes stay pending.
    case deviceInUse(String)
    /// No quarantined change has the number given to settle (``Replicator/resolveQuarantined(sequence:as:)``).
    case notQuarantined(String)
    /// No rejected write has the number given to retry or discard (``Replicator/retryRejected(_:author:)``,
    /// ``Replicator/discardRejected(_:)``), or its target is not replicated here.
    case notRejected(String)
    /// The server (a sync gateway) refused a push because a value in it is one no device can decode:
    /// CBOR nested deeper than the decoder's limit (``KVStore/CBORLimits/maxDepth``, 64), or not one
    /// well-formed data item where the collection's values are CBOR. Nothing of the push was applied;
    /// the change stays pending (issue 47: a member's 70-deep array froze every device that wrote the
    /// key). `reason` names the key and the limit.
    case undecodableValue(String)
    /// Another process owns this container's sync (``SyncKit/SyncOwner``; `nil` when it has not
    /// recorded itself yet): one replicator per container at a time. Wait for it
    /// (``Replicator/whenOwning(container:endpoint:targets:options:standby:events:)``), or ask it
    /// (``SyncKit/SyncService/request(within:startingAgent:)``).
    case ownedElsewhere(SyncOwner?, container: String)

    /// `1.5 s`, `86400 s`.
    package static func seconds(_ duration: Duration) -> String {
        let milliseconds = duration.wholeMilliseconds
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(Double(milliseconds) / 1000) s"
    }

    public var description: String {
        switch self {
        case .invalidServerURL(let url, let reason): "invalid server URL '\(url)': \(reason)"
        case .server(let message): "replication server: \(message)"
        case .unreachable(let message): message
        case .malformedServerRow(let sequence, let reason):
            "refused the server's change \(sequence): \(reason); nothing was applied"
        case .serverSchemaTooNew(let found, let supported):
            "the server's schema is version \(found); this library knows versions up to \(supported)"
        case .notDeclared(let target): "\(target) is not replicated (kvtool sync enable)"
        case .unsupportedTarget(let target, let reason): "\(target) cannot replicate: \(reason)"
        case .corruptState(let message): "corrupt replication state: \(message)"
        case .clockAhead(let ahead, let limit):
            "the server refused this device's changes: their clock is \(Self.seconds(ahead)) ahead of the server's (the limit is \(Self.seconds(limit))); set this machine's clock right, and they are sent once the server's clock reaches them"
        case .pushRefused(_, _, let detail):
            "the sync gateway refused this device's push, nothing of it applied: \(detail); the changes stay pending"
        case .noServer: "this replicator has no server"
        case .invalidCredential(let reason): "invalid credential: \(reason)"
        case .credentialRefused(let reason): "the sync gateway refused this device's credential: \(reason)"
        case .rateLimited(let wait, let budget?): "the sync gateway asks this device to wait: \(budget) (retry in \(Self.seconds(wait)))"
        case .rateLimited(let wait, nil): "the sync gateway is rate-limiting this device; retry in \(Self.seconds(wait))"
        case .deviceInUse(let reason): "the server refused this device's changes: \(reason)"
        case .notQuarantined(let message), .notRejected(let message): message
        case .undecodableValue(let reason): "the server refused this device's changes: \(reason)"
        case .ownedElsewhere(let owner, let container):
            "another replicator is running on \(container)" + (owner.map { " (\($0) owns its sync)" } ?? "")
        }
    }
}
#endif
