/// One change as it travels to the server.
package struct OutgoingChange: Sendable, Equatable {
    package var kind: String
    package var name: String
    package var key: [UInt8]
    /// `nil`: a delete.
    package var value: [UInt8]?
    package var clock: UInt64
    package var base: Int64
    package var token: UInt64

    package init(kind: String, name: String, key: [UInt8], value: [UInt8]?, clock: UInt64, base: Int64, token: UInt64) {
        (self.kind, self.name, self.key, self.value, self.clock, self.base, self.token) = (kind, name, key, value, clock, base, token)
    }
}

/// What the server did with one change of a batch.
package enum PushOutcome: Sendable, Equatable {
    /// Appended (or appended before: a push sent twice); `version` is its sequence number.
    case applied(version: Int64)
    /// Its base was not the current version: the server's current row (`problem` says why that row
    /// cannot be used as it is: a value over the size limit, say).
    case conflict(version: Int64, value: [UInt8]?, clock: UInt64, device: String, problem: String?)
    /// Not applied: a manifest row (``BlobWire/manifestCollection``) whose file's bytes the server has
    /// not got whole in the group (`missing_blob`). The device uploads them and sends the change again;
    /// nothing else in the batch waited for it.
    case missingBlob
    /// Not applied: a validator of the collection refused it (issue 50), or raised an error, which
    /// refuses it too. `reason` is the validator's, at most ``maxReasonCharacters``; the rest is the
    /// server's current row, which the device puts back: `version` nil when the server has no row for
    /// the key, `value` nil for a tombstone (or no row), `device` nil with no row. `problem` says why
    /// that row cannot be used as it is (a value over the size limit, say), as a conflict's does.
    /// Nothing else in the batch waited for it. (Outcome kind 3 on the wire.)
    case rejected(reason: String, version: Int64?, value: [UInt8]?, clock: UInt64, device: String?, problem: String? = nil)

    /// The characters of a rejection's reason at most: the server cuts a longer one (so that it stays
    /// within the wire's 1024-byte bound, four bytes a character at most) before it reaches a device.
    package static let maxReasonCharacters = 256
    /// The bytes of a rejection's reason, or of a row's problem, on the wire at most.
    package static let maxReasonBytes = 1024

    /// The sequence number the outcome names (the change's, or the server's current row's), if any:
    /// the group's log holds at least this far once the push is answered.
    package var version: Int64? {
        switch self {
        case .applied(let version), .conflict(let version, _, _, _, _): version
        case .rejected(_, let version, _, _, _, _): version
        case .missingBlob: nil
        }
    }
}

/// One row of the server's change log (or, in a resync, of its current state).
package struct ServerChange: Sendable, Equatable {
    package var sequence: Int64
    package var device: String
    package var kind: String
    package var name: String
    package var key: [UInt8]
    package var value: [UInt8]?
    package var clock: UInt64
    /// The token its device sent it with (unique per device and group).
    package var token: UInt64
    /// Why the row cannot be applied as it came (a column missing or over its limit), found while
    /// reading it: the row is quarantined, never applied.
    package var problem: String?
    /// Whether `value` holds the row's value (false when it was over the limit and not read).
    package var valueKept: Bool

    package init(sequence: Int64, device: String, kind: String, name: String, key: [UInt8], value: [UInt8]?, clock: UInt64,
                 token: UInt64 = 0, problem: String? = nil, valueKept: Bool = true) {
        (self.sequence, self.device, self.kind, self.name, self.key, self.value) = (sequence, device, kind, name, key, value)
        (self.clock, self.token, self.problem, self.valueKept) = (clock, token, problem, valueKept)
    }
}

/// One page of a group's log after a cursor.
package struct ChangesPage: Sendable, Equatable {
    /// The keys and values of a page, at most (beyond its first change): a sync gateway's default
    /// (`SyncGateway.Limits.maxPageBytes`), and the direct path's.
    package static let maxBytes = 32 << 20
    /// The group's pruning horizon.
    package var prunedThrough: Int64 = 0
    /// The group's last sequence number.
    package var lastSequence: Int64 = 0
    /// The change at the cursor itself, if the log still has it.
    package var atCursor: CursorMark?
    /// Changes after the cursor, in sequence order (none when the cursor is before the horizon or
    /// after the last sequence).
    package var changes: [ServerChange] = []

    package init() {}
}

/// Which change a sequence number held: its device and token, unique on the server.
package struct CursorMark: Codable, Hashable, Sendable {
    package var device: String
    package var token: UInt64

    package init(device: String, token: UInt64) { (self.device, self.token) = (device, token) }
}
