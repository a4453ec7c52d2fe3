import Codecs
import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// The sync gateway's protocol, version 1: HTTP/1.1 requests under `/v1/`, their bodies in this
/// compact binary form (`application/vnd.kvsync.v1`): LEB128 integers (zigzag for signed ones),
/// byte strings and UTF-8 text with their length first, an optional with a 0/1 flag first.
///
/// The endpoints (``GatewayEndpoint``, one case each):
/// - `GET /v1/hello`: ``GatewayHello``.
/// - `POST /v1/push`: ``GatewayPushRequest`` → ``GatewayPushResponse``. Idempotent by (device, token),
///   as the direct path is: a batch sent again is answered as it was the first time.
/// - `GET /v1/changes?after=CURSOR&limit=N`: a ``ChangesPage``.
/// - `GET /v1/state?after=CURSOR&limit=N`: a page of the group's current state (``StatePage``, a resync
///   a page at a time: `after` is the previous page's ``StatePage/next``, absent for the first).
///   `GET /v1/state` without a query: the whole state in one answer (``GatewayState``), as devices
///   before paged resyncs ask it; a state over what one answer may hold is refused (400) in a line
///   that says so.
/// - `GET /v1/live`: server-sent events (``GatewayEvent``): `hello`, then `change` whenever a device
///   commits to the group, a heartbeat comment, and `closed` with a reason before the gateway ends it
///   (a credential revoked or expired, a drain). A device that is refused (503 when the gateway has
///   too many streams open) polls instead.
/// - `HEAD`, `PUT`, `GET /v1/blobs/HASH` (issue 49): a file's bytes by their SHA-256, uploaded by offset
///   in chunks of at most ``BlobWire/chunkBytes`` and downloaded whole or by one byte range
///   (``BlobRequest``, ``ByteRangeRequest``; the headers are ``GatewayHeader``'s).
///
/// Every request carries `Authorization: Bearer TOKEN` and `KVSync-Group: GROUP`, and from a device of
/// this release on, `KVSync-Install: SECRET` (``InstallID``: the container's own, so that a name
/// used again is not an impostor); a refusal is an HTTP
/// status with one line of text. Another version's path (`/v2/…`) is refused with
/// 400 and a line that names both versions.
package enum GatewayWire {
    package static let version = 1
    /// The longest device id, kind or name the protocol carries (and the server's statements read).
    package static let maxNameBytes = 200
    package static let contentType = "application/vnd.kvsync.v1"
    /// The largest request body a gateway takes by default (a push batch; devices split theirs to stay
    /// under it): `SyncGateway.Limits.maxBodyBytes`, and what a device sends at most.
    package static let maxBodyBytes = 32 << 20
    /// ``GatewayHeader/group``'s name.
    package static let groupHeader = GatewayHeader.group.rawValue
    /// How often a gateway sends a live stream's heartbeat comment (``GatewayEvent/heartbeat``).
    package static let heartbeat: Duration = .seconds(15)
    /// How long a device waits on a silent live stream before it drops it (a network that drops
    /// packets): over twice the ``heartbeat``, so that one late heartbeat does not end a stream.
    package static let silence: Duration = .seconds(35)
}

/// Why a gateway message does not decode.
package struct GatewayWireError: Error, CustomStringConvertible {
    package var description: String
}

/// Writes the protocol's values.
package struct WireWriter {
    package private(set) var bytes: [UInt8] = []

    package init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    package mutating func unsigned(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    package mutating func signed(_ value: Int64) {
        unsigned(UInt64(bitPattern: (value << 1) ^ (value >> 63)))
    }

    package mutating func bool(_ value: Bool) { bytes.append(value ? 1 : 0) }

    package mutating func data(_ value: [UInt8]) {
        unsigned(UInt64(value.count))
        bytes += value
    }

    package mutating func text(_ value: String) {
        unsigned(UInt64(value.utf8.count))
        bytes += value.utf8
    }

    package mutating func optionalData(_ value: [UInt8]?) {
        bool(value != nil)
        if let value { data(value) }
    }

    package mutating func optionalText(_ value: String?) {
        bool(value != nil)
        if let value { text(value) }
    }
}

/// Reads the protocol's values from bytes that may come from anyone: every length is checked against
/// what is left before anything is allocated.
package struct WireReader {
    private let bytes: [UInt8]
    private var offset = 0

    package init(_ bytes: [UInt8]) { self.bytes = bytes }

    package var isAtEnd: Bool { offset == bytes.count }

    private func malformed(_ what: String) -> GatewayWireError {
        GatewayWireError(description: "\(what) at byte \(offset) of \(bytes.count)")
    }

    package mutating func unsigned() throws -> UInt64 {
        var value: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard offset < bytes.count else { throw malformed("an integer is cut short") }
            let byte = bytes[offset]
            offset += 1
            guard shift < 64, shift < 63 || byte <= 1 else { throw malformed("an integer is over 64 bits") }
            value |= UInt64(byte & 0x7F) << shift
            if byte & 0x80 == 0 { return value }
            shift += 7
        }
    }

    package mutating func signed() throws -> Int64 {
        let raw = try unsigned()
        return Int64(bitPattern: (raw >> 1) ^ (0 &- (raw & 1)))
    }

    package mutating func bool() throws -> Bool {
        guard offset < bytes.count else { throw malformed("a flag is missing") }
        defer { offset += 1 }
        switch bytes[offset] {
        case 0: return false
        case 1: return true
        default: throw malformed("a flag is \(bytes[offset]), not 0 or 1")
        }
    }

    /// A count of items that each take at least one byte: never more than the bytes left.
    package mutating func count(_ what: String) throws -> Int {
        let count = try unsigned()
        guard count <= UInt64(bytes.count - offset) else { throw malformed("\(what) counts \(count) items, more than the bytes left") }
        return Int(count)
    }

    package mutating func data(max: Int) throws -> [UInt8] {
        Array(bytes[try span(max: max)])
    }

    /// Where the next byte string is (of `max` bytes at most), read past.
    private mutating func span(max: Int) throws -> Range<Int> {
        let length = try unsigned()
        guard length <= UInt64(max) else { throw malformed("a byte string of \(length) bytes is over its \(max)-byte limit") }
        guard length <= UInt64(bytes.count - offset) else { throw malformed("a byte string is cut short") }
        defer { offset += Int(length) }
        return offset..<offset + Int(length)
    }

    package mutating func text(max: Int) throws -> String {
        let range = try span(max: max)
        // Checked once and copied from the message (``CBORReader/string(_:)``): `String(validating:as:)`
        // is not specialized, and instantiated its generic types at each call (3,100 instructions a
        // pushed change on the device, reading the answers: callgrind, issue 51).
        let text = bytes.withUnsafeBytes { CBORReader.string(UnsafeRawBufferPointer(rebasing: $0[range])) }
        guard let text else { throw malformed("a text is not UTF-8") }
        return text
    }

    /// A text, which is `previous` when it has the same bytes (a batch's changes repeat their kind
    /// and name): the same String, without making another.
    package mutating func text(max: Int, sameAs previous: String?) throws -> String {
        guard let previous else { return try text(max: max) }
        let start = offset
        let length = try unsigned()
        if length <= UInt64(bytes.count - offset), Int(length) == previous.utf8.count {
            // memcmp of the two buffers: comparing the String's UTF8View element by element cost the
            // gateway 800 instructions a change (callgrind, a push of 10,000 changes).
            let at = offset
            let same: Bool = bytes.withUnsafeBufferPointer { all -> Bool in
                let equal: Bool? = previous.utf8.withContiguousStorageIfAvailable { utf8 -> Bool in
                    utf8.isEmpty || memcmp(all.baseAddress! + at, utf8.baseAddress!, utf8.count) == 0
                }
                return equal ?? false
            }
            if same {
                offset += Int(length)
                return previous
            }
        }
        offset = start
        return try text(max: max)
    }

    package mutating func optionalData(max: Int) throws -> [UInt8]? {
        try bool() ? try data(max: max) : nil
    }

    /// An optional value of at most `max` bytes; a longer one (within the message) is stepped over,
    /// and its length comes back instead: the one row is refused, not the whole answer (a device whose
    /// limit is lower than its gateway's would otherwise fail every round on one large value).
    package mutating func optionalValue(max: Int) throws -> (value: [UInt8]?, overLimit: UInt64?) {
        guard try bool() else { return (nil, nil) }
        let start = offset
        let length = try unsigned()
        guard length > UInt64(max) else {
            offset = start
            return (try data(max: max), nil)
        }
        guard length <= UInt64(bytes.count - offset) else { throw malformed("a byte string is cut short") }
        offset += Int(length)
        return (nil, length)
    }

    package mutating func optionalText(max: Int) throws -> String? {
        try bool() ? try text(max: max) : nil
    }

    package func end() throws {
        guard isAtEnd else { throw malformed("\(bytes.count - offset) bytes follow the message") }
    }
}

/// `GET /v1/hello`: who the gateway takes this device for.
package struct GatewayHello: Sendable, Equatable {
    package var serverID: String
    package var group: String
    /// The device id the gateway records this credential's pushes under (from the credential: the
    /// name it was issued to, or one derived from it, and the request's install id: ``InstallID``),
    /// which the device takes as its own; `nil` for a credential that names no device (it pulls only).
    package var device: String?
    package var readOnly: Bool

    package init(serverID: String, group: String, device: String?, readOnly: Bool) {
        (self.serverID, self.group, self.device, self.readOnly) = (serverID, group, device, readOnly)
    }

    package func encoded() -> [UInt8] {
        var writer = WireWriter()
        writer.unsigned(UInt64(GatewayWire.version))
        writer.text(serverID)
        writer.text(group)
        writer.optionalText(device)
        writer.bool(readOnly)
        return writer.bytes
    }

    package init(decoding bytes: [UInt8]) throws {
        var reader = WireReader(bytes)
        let version = try reader.unsigned()
        guard version == UInt64(GatewayWire.version) else {
            throw GatewayWireError(description: "the gateway speaks protocol version \(version); this device speaks \(GatewayWire.version)")
        }
        serverID = try reader.text(max: 200)
        group = try reader.text(max: 1024)
        device = try reader.optionalText(max: GatewayWire.maxNameBytes)
        readOnly = try reader.bool()
        try reader.end()
    }
}

/// `POST /v1/push`'s body.
///
/// Who pushes, and how far ahead of the server's clock a stamp may be, are the gateway's to say, not
/// the body's: the device of every change is the verified credential's, and the clock bound is the
/// gateway's (`--max-clock-skew`) within the server's. The body's `device` is empty, or the device id
/// the gateway's hello gave this credential and install id (anything else is refused: 403); its
/// `maxClockSkewMilliseconds` keeps version 1's layout and is read by no gateway.
package struct GatewayPushRequest: Sendable {
    package var device: String
    package var maxClockSkewMilliseconds: Int64
    package var changes: [OutgoingChange]

    package init(device: String, maxClockSkewMilliseconds: Int64 = 0, changes: [OutgoingChange]) {
        (self.device, self.maxClockSkewMilliseconds, self.changes) = (device, maxClockSkewMilliseconds, changes)
    }

    package func encoded() -> [UInt8] {
        var writer = WireWriter(capacity: 64 + changes.reduce(0) { $0 + 40 + $1.key.count + ($1.value?.count ?? 0) })
        writer.text(device)
        writer.signed(maxClockSkewMilliseconds)
        writer.unsigned(UInt64(changes.count))
        for change in changes {
            writer.text(change.kind)
            writer.text(change.name)
            writer.data(change.key)
            writer.optionalData(change.value)
            writer.unsigned(change.clock)
            writer.signed(change.base)
            writer.unsigned(change.token)
        }
        return writer.bytes
    }

    /// Decodes a body from a device: every length is checked before anything is allocated, and what
    /// no replicator sends is refused here, before the database sees it: a kind or name that is empty
    /// or holds a control character (a NUL byte cannot be stored in PostgreSQL's text), a key over
    /// LMDB's 511 bytes, and a clock or token of 2^63 or more (the server keeps both as `bigint`).
    package init(decoding bytes: [UInt8], maxValueBytes: Int) throws {
        var reader = WireReader(bytes)
        device = try reader.text(max: GatewayWire.maxNameBytes)
        try Self.checkName(device, "the device", allowEmpty: true)
        maxClockSkewMilliseconds = try reader.signed()
        let count = try reader.count("the batch")
        changes = []
        changes.reserveCapacity(count)
        var last: (kind: String, name: String)?
        for index in 0..<count {
            let kind = try reader.text(max: GatewayWire.maxNameBytes, sameAs: last?.kind)
            let name = try reader.text(max: GatewayWire.maxNameBytes, sameAs: last?.name)
            if last?.kind != kind { try Self.checkName(kind, "change \(index + 1)'s kind") }
            if last?.name != name { try Self.checkName(name, "change \(index + 1)'s name") }
            last = (kind, name)
            let change = OutgoingChange(kind: kind, name: name,
                                        key: try reader.data(max: Store.maxKeySize),
                                        value: try reader.optionalData(max: maxValueBytes),
                                        clock: try reader.unsigned(), base: try reader.signed(), token: try reader.unsigned())
            guard change.clock <= UInt64(Int64.max) else {
                throw GatewayWireError(description: "change \(index + 1)'s clock is 2^63 or more")
            }
            guard change.token <= UInt64(Int64.max) else {
                throw GatewayWireError(description: "change \(index + 1)'s token is 2^63 or more")
            }
            changes.append(change)
        }
        try reader.end()
    }

    /// Refuses an empty name (unless `allowEmpty`) and one with a control character (U+0000–U+001F,
    /// U+007F–U+009F).
    static func checkName(_ name: String, _ what: String, allowEmpty: Bool = false) throws {
        if name.isEmpty && !allowEmpty { throw GatewayWireError(description: "\(what) is empty") }
        if name.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) {
            throw GatewayWireError(description: "\(what) holds a control character")
        }
    }
}

/// `POST /v1/push`'s answer: one outcome per change, or the whole batch refused for its clock: how
/// far ahead of the server's clock its latest stamp is, and the bound that refused it (the gateway's
/// within the server's own), both in milliseconds; or the whole batch refused for the reasons listed
/// (a budget of the server's it would break), nothing of it applied.
package enum GatewayPushResponse: Sendable {
    /// Kind 0: one outcome per change, each its kind then its fields: 0 applied (version), 1 conflict
    /// (version, value, clock, device, problem), 2 missing blob (none; issue 49), 3 rejected (reason,
    /// a flag then the version, value, clock, device, problem; issue 50). A device of an earlier
    /// release refuses kind 3 as "an outcome of kind 3": its push fails loudly and its write stays
    /// queued, never dropped.
    case outcomes([PushOutcome])
    case clockAhead(milliseconds: Int64, limitMilliseconds: Int64)
    /// Kind 2: at least one reason, at most ``maxRefusals``.
    case refused([PushRefusal])

    /// The reasons one refusal lists at most.
    package static let maxRefusals = 64
    /// The batch was refused whole, nothing of it applied: a change has a value no device can decode
    /// (``UndecodableValue``); `reason` says why, naming its key. (Kind 3 on the wire: kind 2 is left
    /// to the refusal of a push over its principal's budget.)
    case undecodableValue(reason: String)

    package func encoded() -> [UInt8] {
        var writer = WireWriter()
        switch self {
        case .clockAhead(let milliseconds, let limit):
            writer.unsigned(1)
            writer.signed(milliseconds)
            writer.signed(limit)
        case .refused(let reasons):
            writer.unsigned(2)
            writer.unsigned(UInt64(reasons.count))
            for reason in reasons { reason.encode(into: &writer) }
        case .undecodableValue(let reason):
            writer.unsigned(3)
            writer.text(reason)
        case .outcomes(let outcomes):
            writer.unsigned(0)
            writer.unsigned(UInt64(outcomes.count))
            for outcome in outcomes {
                switch outcome {
                case .applied(let version):
                    writer.unsigned(0)
                    writer.signed(version)
                case .conflict(let version, let value, let clock, let device, let problem):
                    writer.unsigned(1)
                    writer.signed(version)
                    writer.optionalData(value)
                    writer.unsigned(clock)
                    writer.text(device)
                    writer.optionalText(problem)
                case .missingBlob:
                    writer.unsigned(2)
                case .rejected(let reason, let version, let value, let clock, let device, let problem):
                    writer.unsigned(3)
                    writer.text(reason)
                    writer.bool(version != nil)
                    if let version { writer.signed(version) }
                    writer.optionalData(value)
                    writer.unsigned(clock)
                    writer.optionalText(device)
                    writer.optionalText(problem)
                }
            }
        }
        return writer.bytes
    }

    package init(decoding bytes: [UInt8], maxValueBytes: Int) throws {
        var reader = WireReader(bytes)
        switch try reader.unsigned() {
        case 1:
            self = .clockAhead(milliseconds: try reader.signed(), limitMilliseconds: try reader.signed())
        case 2:
            let count = try reader.count("the refusal's reasons")
            guard (1...Self.maxRefusals).contains(count) else {
                throw GatewayWireError(description: "a push refusal with \(count) reasons (1 to \(Self.maxRefusals))")
            }
            self = .refused(try (0..<count).map { _ in try PushRefusal(from: &reader) })
        case 3:
            self = .undecodableValue(reason: try reader.text(max: 1024))
        case 0:
            let count = try reader.count("the outcomes")
            var outcomes: [PushOutcome] = []
            outcomes.reserveCapacity(count)
            for _ in 0..<count {
                switch try reader.unsigned() {
                case 0: outcomes.append(.applied(version: try reader.signed()))
                case 1:
                    let version = try reader.signed()
                    let (value, overLimit) = try reader.optionalValue(max: maxValueBytes)
                    let clock = try reader.unsigned(), device = try reader.text(max: GatewayWire.maxNameBytes)
                    let problem = try reader.optionalText(max: 1024)
                    outcomes.append(.conflict(version: version, value: value, clock: clock, device: device,
                                              problem: problem ?? overLimit.map { "its value is \($0) bytes, over the \(maxValueBytes)-byte limit" }))
                case 2: outcomes.append(.missingBlob)
                case 3:
                    let reason = try reader.text(max: PushOutcome.maxReasonBytes)
                    let version = try reader.bool() ? try reader.signed() : nil
                    let (value, overLimit) = try reader.optionalValue(max: maxValueBytes)
                    let clock = try reader.unsigned(), device = try reader.optionalText(max: GatewayWire.maxNameBytes)
                    let problem = try reader.optionalText(max: PushOutcome.maxReasonBytes)
                    outcomes.append(.rejected(reason: reason, version: version, value: value, clock: clock, device: device,
                                              problem: problem ?? overLimit.map { "its value is \($0) bytes, over the \(maxValueBytes)-byte limit" }))
                case let other: throw GatewayWireError(description: "an outcome of kind \(other)")
                }
            }
            self = .outcomes(outcomes)
        case let other:
            throw GatewayWireError(description: "a push answer of kind \(other)")
        }
        try reader.end()
    }
}

extension ServerChange {
    func write(to writer: inout WireWriter) {
        writer.signed(sequence)
        writer.text(device)
        writer.text(kind)
        writer.text(name)
        writer.data(key)
        writer.optionalData(value)
        writer.unsigned(clock)
        writer.unsigned(token)
        writer.optionalText(problem)
        writer.bool(valueKept)
    }

    /// A value over `maxValueBytes` makes the row one to quarantine ("over the limit", its value not
    /// kept), as on the direct path, where the statement leaves such a value unread.
    init(reading reader: inout WireReader, maxValueBytes: Int) throws {
        let sequence = try reader.signed(), device = try reader.text(max: GatewayWire.maxNameBytes + 1)
        let kind = try reader.text(max: GatewayWire.maxNameBytes), name = try reader.text(max: GatewayWire.maxNameBytes)
        let key = try reader.data(max: Store.maxKeySize)
        let (value, overLimit) = try reader.optionalValue(max: maxValueBytes)
        let clock = try reader.unsigned(), token = try reader.unsigned(), problem = try reader.optionalText(max: 1024)
        let valueKept = try reader.bool()
        self.init(sequence: sequence, device: device, kind: kind, name: name, key: key, value: value, clock: clock, token: token,
                  problem: problem ?? overLimit.map { "its value is \($0) bytes, over the \(maxValueBytes)-byte limit" },
                  valueKept: valueKept && overLimit == nil)
    }
}

extension ChangesPage {
    package func encoded() -> [UInt8] {
        var writer = WireWriter(capacity: 64 + changes.reduce(0) { $0 + 48 + $1.key.count + ($1.value?.count ?? 0) })
        writer.signed(prunedThrough)
        writer.signed(lastSequence)
        writer.bool(atCursor != nil)
        if let atCursor {
            writer.text(atCursor.device)
            writer.unsigned(atCursor.token)
        }
        writer.unsigned(UInt64(changes.count))
        for change in changes { change.write(to: &writer) }
        return writer.bytes
    }

    package init(decoding bytes: [UInt8], maxValueBytes: Int) throws {
        var reader = WireReader(bytes)
        self.init()
        prunedThrough = try reader.signed()
        lastSequence = try reader.signed()
        if try reader.bool() {
            atCursor = CursorMark(device: try reader.text(max: GatewayWire.maxNameBytes + 1), token: try reader.unsigned())
        }
        let count = try reader.count("the page")
        changes.reserveCapacity(count)
        for _ in 0..<count { changes.append(try ServerChange(reading: &reader, maxValueBytes: maxValueBytes)) }
        try reader.end()
    }
}

/// `GET /v1/state`'s answer (without a query: the whole state).
package struct GatewayState: Sendable {
    package var lastSequence: Int64
    package var rows: [ServerChange]

    package init(lastSequence: Int64, rows: [ServerChange]) { (self.lastSequence, self.rows) = (lastSequence, rows) }

    package func encoded() -> [UInt8] {
        var writer = WireWriter(capacity: 64 + rows.reduce(0) { $0 + 48 + $1.key.count + ($1.value?.count ?? 0) })
        writer.signed(lastSequence)
        writer.unsigned(UInt64(rows.count))
        for row in rows { row.write(to: &writer) }
        return writer.bytes
    }

    package init(decoding bytes: [UInt8], maxValueBytes: Int) throws {
        var reader = WireReader(bytes)
        lastSequence = try reader.signed()
        let count = try reader.count("the state")
        rows = []
        rows.reserveCapacity(count)
        for _ in 0..<count { rows.append(try ServerChange(reading: &reader, maxValueBytes: maxValueBytes)) }
        try reader.end()
    }
}
