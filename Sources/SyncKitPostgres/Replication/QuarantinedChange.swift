#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

/// A change pulled from the server that this device could not apply, kept with its raw bytes and the
/// reason in `_sync.quarantine` (key: its sequence number) instead of stopping the pull: a value
/// written by a newer version of the app, a row no replicator writes, or a clock further ahead than
/// ``Replicator/Options/maxClockSkew``. The cursor moves past it and later changes apply;
/// ``Replicator/retryQuarantined()`` (`kvtool sync quarantine retry`) applies the ones that now
/// can be, after an app upgrade or once the clocks agree. While a key has a quarantined change, this
/// device's own writes of it wait (`pendingChanges`) rather than go over the server's newer value.
///
/// A change stays quarantined until it is applied, superseded (a newer version of its key applied) or
/// dropped to keep the quarantine within its bounds, also when the device starts over with another
/// server (``SyncEvent/serverChanged(server:)``): it is then kept as the previous server's
/// (``fromPreviousServer``), under a negative number that no server's change takes, older than any
/// change of the new server. Such a change holds back none of this device's writes (the server it
/// was newer than is gone), and any version of its key that the new server gives supersedes it.
public struct QuarantinedChange: Codable, Hashable, Sendable, CustomStringConvertible {
    /// The server's sequence number of the change; for a change kept from the previous server, the
    /// negative number it is kept under (its number there is ``previousSequence``).
    public var sequence: Int64
    /// `collection` or `defaults`, as the server's row spells it (or whatever a bad row holds).
    public var kind: String
    public var name: String
    public var key: [UInt8]
    /// The value's bytes (`nil` for a delete, or when the value was over the size limit and was not
    /// read).
    public var value: [UInt8]?
    /// Whether `value` was read: false when it was over ``Replicator/Options/maxValueBytes``.
    public var valueKept: Bool
    public var clock: UInt64
    /// The device that sent it.
    public var device: String
    public var token: UInt64
    /// Why it was not applied, in one line.
    public var reason: String
    public var quarantinedAt: Date
    /// Why the server's row is not one any replicator writes (a negative clock, a column over its
    /// limit), when that is why it was quarantined: a retry cannot change it, and it stays.
    public var rowProblem: String?
    /// Whether it came from the server this device followed before it started over with another.
    public var fromPreviousServer: Bool = false
    /// Its sequence number on that server.
    public var previousSequence: Int64?
    /// This container's history token when the change was quarantined: a local write of the key
    /// after it is the user's newer word on the key, made once this device knew of the change (if not
    /// of its value), and is sent over it, as a write on a version this device has would be; writes
    /// through it wait until the user settles the key (``Replicator/resolveQuarantined(sequence:as:)``).
    /// `nil` in a quarantine kept before issue 47: every write of the key waits.
    public var heldThrough: UInt64?

    /// The collection or suite it belongs to, if its kind is one a replicator writes.
    public var target: Mutation.Target? { Mutation.Target(kindName: kind, name: name) }

    enum CodingKeys: String, CodingKey {
        case sequence, kind, name, key, value, valueKept, clock, device, token, reason, quarantinedAt
        case rowProblem, fromPreviousServer, previousSequence, heldThrough
    }

    public init(sequence: Int64, kind: String, name: String, key: [UInt8], value: [UInt8]?, valueKept: Bool, clock: UInt64,
                device: String, token: UInt64, reason: String, quarantinedAt: Date, rowProblem: String? = nil,
                fromPreviousServer: Bool = false, previousSequence: Int64? = nil, heldThrough: UInt64? = nil) {
        self.sequence = sequence
        self.kind = kind
        self.name = name
        self.key = key
        self.value = value
        self.valueKept = valueKept
        self.clock = clock
        self.device = device
        self.token = token
        self.reason = reason
        self.quarantinedAt = quarantinedAt
        self.rowProblem = rowProblem
        self.fromPreviousServer = fromPreviousServer
        self.previousSequence = previousSequence
        self.heldThrough = heldThrough
    }

    // Bytes are stored as byte strings (`Data`), not as arrays of numbers: a value of megabytes
    // decodes with one copy.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        sequence = try container.decode(Int64.self, forKey: .sequence)
        kind = try container.decode(String.self, forKey: .kind)
        name = try container.decode(String.self, forKey: .name)
        key = [UInt8](try container.decode(Data.self, forKey: .key))
        value = try container.decodeIfPresent(Data.self, forKey: .value).map { [UInt8]($0) }
        valueKept = try container.decode(Bool.self, forKey: .valueKept)
        clock = try container.decode(UInt64.self, forKey: .clock)
        device = try container.decode(String.self, forKey: .device)
        token = try container.decode(UInt64.self, forKey: .token)
        reason = try container.decode(String.self, forKey: .reason)
        quarantinedAt = try container.decode(Date.self, forKey: .quarantinedAt)
        rowProblem = try container.decodeIfPresent(String.self, forKey: .rowProblem)
        fromPreviousServer = try container.decodeIfPresent(Bool.self, forKey: .fromPreviousServer) ?? false
        previousSequence = try container.decodeIfPresent(Int64.self, forKey: .previousSequence)
        heldThrough = try container.decodeIfPresent(UInt64.self, forKey: .heldThrough)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(sequence, forKey: .sequence)
        try container.encode(kind, forKey: .kind)
        try container.encode(name, forKey: .name)
        try container.encode(Data(key), forKey: .key)
        try container.encodeIfPresent(value.map { Data($0) }, forKey: .value)
        try container.encode(valueKept, forKey: .valueKept)
        try container.encode(clock, forKey: .clock)
        try container.encode(device, forKey: .device)
        try container.encode(token, forKey: .token)
        try container.encode(reason, forKey: .reason)
        try container.encode(quarantinedAt, forKey: .quarantinedAt)
        // Written only when set: the quarantine of a device that never changed servers stays as an
        // older build wrote (and reads) it.
        try container.encodeIfPresent(rowProblem, forKey: .rowProblem)
        try container.encodeIfPresent(heldThrough, forKey: .heldThrough)
        if fromPreviousServer {
            try container.encode(true, forKey: .fromPreviousServer)
            try container.encodeIfPresent(previousSequence, forKey: .previousSequence)
        }
    }

    /// One printable line: what another device sent has its control characters escaped. The key is
    /// its bytes in hex (`0x6b`); ``description(key:)`` takes it as the collection's key encoding
    /// renders it (`kvtool` shows it so, as `kvtool get` takes it).
    public var description: String { description(key: "0x" + Hex.encode(Array(key.prefix(64)))) }

    /// ``description`` with the key shown as `key` (escaped as the rest of the line).
    public func description(key: String) -> String {
        func shown(_ text: some StringProtocol) -> String { Escaping.escape(String(text), quoting: false, shortForms: true, style: .swift) }
        let number = fromPreviousServer ? "change \(previousSequence.map(String.init) ?? "?") of the previous server" : "change \(sequence)"
        return "\(number) to \(target.map(\.description).map(shown) ?? "'\(shown(kind.prefix(40)))'") key \(shown(key.prefix(512))) from \(shown(device.prefix(64))): \(shown(reason))"
    }
}
#endif
