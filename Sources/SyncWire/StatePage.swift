import KVStore

/// One page of a group's current state (a resync a page at a time, `GET /v1/state?after=CURSOR&limit=N`):
/// rows in the server's key order (``StateCursor``), up to a count and a byte bound, so that neither the
/// gateway nor the device ever holds more of the group than a page.
///
/// A page is read in a transaction of its own, so the pages of one resync are not one snapshot: a
/// device takes the first page's ``lastSequence`` as where the resync stands, then follows the log
/// after it, which holds whatever changed while it paged (a row read at a later version is never
/// older than the log's; a key deleted before its page came is a tombstone there).
package struct StatePage: Sendable, Equatable {
    /// The group's pruning horizon when the page was read.
    package var prunedThrough: Int64
    /// The group's last sequence number, read before the page's rows: every change up to it is in them
    /// or in the pages before.
    package var lastSequence: Int64
    /// The rows, each with its version as its ``ServerChange/sequence``, in the server's order.
    package var rows: [ServerChange]
    /// On the first page, the rows that no cursor can name (a kind, name or key over the protocol's
    /// limits: no replicator writes one), unread but for what says why: a device quarantines them.
    /// They take no part in the page's range.
    package var unnameable: [ServerChange]
    /// Where the next page starts; `nil` on the last page. The page covers the state after the cursor
    /// it was asked with, through this one (to the end of the state, on the last page).
    package var next: StateCursor?

    package init(prunedThrough: Int64, lastSequence: Int64, rows: [ServerChange], unnameable: [ServerChange] = [], next: StateCursor?) {
        (self.prunedThrough, self.lastSequence, self.rows, self.unnameable, self.next) = (prunedThrough, lastSequence, rows, unnameable, next)
    }

    package func encoded() -> [UInt8] {
        var writer = WireWriter(capacity: 64 + rows.reduce(0) { $0 + 48 + $1.key.count + ($1.value?.count ?? 0) })
        writer.signed(prunedThrough)
        writer.signed(lastSequence)
        writer.bool(next != nil)
        if let next {
            writer.text(next.kind)
            writer.text(next.name)
            writer.data(next.key)
        }
        writer.unsigned(UInt64(rows.count))
        for row in rows { row.write(to: &writer) }
        writer.unsigned(UInt64(unnameable.count))
        for row in unnameable { row.write(to: &writer) }
        return writer.bytes
    }

    package init(decoding bytes: [UInt8], maxValueBytes: Int) throws {
        var reader = WireReader(bytes)
        prunedThrough = try reader.signed()
        lastSequence = try reader.signed()
        next = try reader.bool()
            ? StateCursor(kind: try reader.text(max: GatewayWire.maxNameBytes), name: try reader.text(max: GatewayWire.maxNameBytes),
                          key: try reader.data(max: Store.maxKeySize))
            : nil
        let count = try reader.count("the page")
        rows = []
        rows.reserveCapacity(count)
        for _ in 0..<count { rows.append(try ServerChange(reading: &reader, maxValueBytes: maxValueBytes)) }
        let others = try reader.count("the unnameable rows")
        unnameable = []
        unnameable.reserveCapacity(others)
        for _ in 0..<others { unnameable.append(try ServerChange(reading: &reader, maxValueBytes: maxValueBytes)) }
        try reader.end()
    }
}
