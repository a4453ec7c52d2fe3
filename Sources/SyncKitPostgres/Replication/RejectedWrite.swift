#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

/// A write of this device that the server refused with a reason (a validator of the collection:
/// `kvsync_validators`, issue 50), kept in `_sync.rejected` (key: ``id``) where the app
/// (``Replication/rejected(in:)``) and `kvtool sync rejected list` see it. The server's row of the key
/// was put back in its place (or the key removed, where the server has none), and the changes after it
/// went on: a rejection never holds the outbox. ``Replicator/retryRejected(_:author:)`` writes the value
/// again as a new local change (validated again at the next push); ``Replicator/discardRejected(_:)``
/// drops the record.
public struct RejectedWrite: Codable, Hashable, Sendable, CustomStringConvertible {
    /// Its number on this device: given in order, never given twice.
    public var id: UInt64
    /// `collection` or `defaults`, and the collection's or suite's name.
    public var kind: String
    public var name: String
    public var key: [UInt8]
    /// The value this device wrote (`nil`: a delete was refused).
    public var value: [UInt8]?
    /// The write's clock.
    public var clock: UInt64
    /// Why the server refused it, in the validator's words.
    public var reason: String
    public var rejectedAt: Date
    /// The server's version of the key that was put back in its place (`nil`: the server had no row,
    /// and the key was removed here).
    public var serverVersion: Int64?

    /// The collection or suite it belongs to.
    public var target: Mutation.Target? { Mutation.Target(kindName: kind, name: name) }

    enum CodingKeys: String, CodingKey {
        case id, kind, name, key, value, clock, reason, rejectedAt, serverVersion
    }

    public init(id: UInt64, kind: String, name: String, key: [UInt8], value: [UInt8]?, clock: UInt64, reason: String,
                rejectedAt: Date, serverVersion: Int64?) {
        self.id = id
        self.kind = kind
        self.name = name
        self.key = key
        self.value = value
        self.clock = clock
        self.reason = reason
        self.rejectedAt = rejectedAt
        self.serverVersion = serverVersion
    }

    // Bytes as byte strings (`Data`), as ``QuarantinedChange`` keeps them: one copy to decode.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(UInt64.self, forKey: .id)
        kind = try container.decode(String.self, forKey: .kind)
        name = try container.decode(String.self, forKey: .name)
        key = [UInt8](try container.decode(Data.self, forKey: .key))
        value = try container.decodeIfPresent(Data.self, forKey: .value).map { [UInt8]($0) }
        clock = try container.decode(UInt64.self, forKey: .clock)
        reason = try container.decode(String.self, forKey: .reason)
        rejectedAt = try container.decode(Date.self, forKey: .rejectedAt)
        serverVersion = try container.decodeIfPresent(Int64.self, forKey: .serverVersion)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(kind, forKey: .kind)
        try container.encode(name, forKey: .name)
        try container.encode(Data(key), forKey: .key)
        try container.encodeIfPresent(value.map { Data($0) }, forKey: .value)
        try container.encode(clock, forKey: .clock)
        try container.encode(reason, forKey: .reason)
        try container.encode(rejectedAt, forKey: .rejectedAt)
        try container.encodeIfPresent(serverVersion, forKey: .serverVersion)
    }

    /// One printable line (the server's reason with its control characters escaped); the key as its
    /// bytes in hex. ``description(key:)`` takes it as the collection's key encoding renders it.
    public var description: String { description(key: "0x" + Hex.encode(Array(key.prefix(64)))) }

    public func description(key: String) -> String {
        func shown(_ text: some StringProtocol) -> String { Escaping.escape(String(text), quoting: false, shortForms: true, style: .swift) }
        let write = value == nil ? "delete" : "write"
        return "\(write) \(id) of \(target?.description ?? kind) key \(shown(key.prefix(512))) refused by the server: \(shown(reason.prefix(2_000)))"
    }
}
#endif
