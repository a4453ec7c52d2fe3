/// Why the server refused a whole push, as `POST /v1/push` answers it (``GatewayPushResponse/refused(_:)``):
/// one reason per budget or rule the batch broke, each naming its limit, so that a device says in one
/// line what stopped it. Nothing of a refused batch was applied. A reason this version does not know
/// (a newer server's) still travels as its name, its figures and its line.
package struct PushRefusal: Sendable, Equatable, CustomStringConvertible {
    /// What refused it: one of the ``Reason`` names (a newer server may send others).
    package var reason: String
    /// The limit, in ``unit``s (`100000` changes).
    package var limit: Int64
    /// What the batch would have come to against it (its changes, or the window's total with them).
    package var amount: Int64
    /// `changes`, `bytes`.
    package var unit: String
    /// Seconds until a batch this size fits again (0: never, however long the device waits: it must be
    /// smaller).
    package var retryAfter: Int64

    /// The reasons this version names.
    package enum Reason: String, Sendable, CaseIterable {
        case changesPerPush = "changes-per-push"
        case bytesPerPush = "bytes-per-push"
        case deviceChangesPerMinute = "device-changes-per-minute"
        case deviceBytesPerMinute = "device-bytes-per-minute"
        case groupChangesPerHour = "group-changes-per-hour"
        case groupBytesPerHour = "group-bytes-per-hour"

        /// `changes per push`, `bytes a minute for this device`.
        var words: String {
            switch self {
            case .changesPerPush: "changes per push"
            case .bytesPerPush: "bytes of keys and values per push"
            case .deviceChangesPerMinute: "changes a minute for this device"
            case .deviceBytesPerMinute: "bytes of keys and values a minute for this device"
            case .groupChangesPerHour: "changes an hour for the whole group"
            case .groupBytesPerHour: "bytes of keys and values an hour for the whole group"
            }
        }
    }

    package init(reason: String, limit: Int64, amount: Int64, unit: String, retryAfter: Int64) {
        (self.reason, self.limit, self.amount, self.unit, self.retryAfter) = (reason, limit, amount, unit, retryAfter)
    }

    package init(_ reason: Reason, limit: Int, amount: Int, retryAfter: Int) {
        let unit = reason.rawValue.contains("bytes") ? "bytes" : "changes"
        self.init(reason: reason.rawValue, limit: Int64(limit), amount: Int64(amount), unit: unit, retryAfter: Int64(retryAfter))
    }

    /// `the server's budget of 100000 changes per push (changes-per-push): this batch is 200000`.
    package var description: String {
        let words = Reason(rawValue: reason)?.words ?? unit
        let wait = retryAfter > 0 ? "; it fits again in \(retryAfter) s" : ""
        return "the server's budget of \(limit) \(words) (\(reason)): this batch comes to \(amount)\(wait)"
    }

    func encode(into writer: inout WireWriter) {
        writer.text(reason)
        writer.signed(limit)
        writer.signed(amount)
        writer.text(unit)
        writer.signed(retryAfter)
    }

    init(from reader: inout WireReader) throws {
        let reason = try reader.text(max: 64)
        let (limit, amount) = (try reader.signed(), try reader.signed())
        let unit = try reader.text(max: 64)
        self.init(reason: reason, limit: limit, amount: amount, unit: unit, retryAfter: try reader.signed())
        try GatewayPushRequest.checkName(reason, "a refusal's reason")
        try GatewayPushRequest.checkName(unit, "a refusal's unit")
    }
}
