/// A lazy, typed cursor over a range of a ``KVCollection``: each entry is read and decoded only when
/// you step to it, so a scan that stops early reads only what it used, and a long scan streams
/// without collecting an array.
///
/// ```swift
/// try store.read { tx in
///     let cursor = try records.cursor(from...today, in: tx)
///     while let (day, record) = try cursor.next() {
///         if record.cachedInputCount == 0 { break }   // nothing after this is read
///         process(day, record)
///     }
/// }
/// ```
///
/// Get one from ``KVCollection/cursor(_:reverse:in:)``. It is valid only during the execution of the
/// closure of the transaction it was opened in, like the transaction itself: the transaction closes
/// the LMDB cursor when the closure returns, and any later call throws
/// ``KVStoreError/transactionEnded``. Use it on the thread that runs that closure. Keys and values
/// are copied out of the memory map as they are decoded, so what ``next()`` returns stays valid after
/// the transaction.
///
/// In a write transaction, the cursor sees the transaction's own writes as LMDB's cursors do; writing
/// to the same collection while stepping through it is allowed, but collecting the keys first is
/// easier to reason about.
///
/// A `KVCursor` is not a Swift `Sequence`: a step can fail (a value that does not decode, an LMDB
/// error), and a `Sequence`'s iterator cannot throw. As GRDB's cursors do, it offers a throwing
/// ``next()`` and ``forEach(_:)``.
public final class KVCursor<Key: OrderedKey, Value> {
    private let collection: KVCollection<Key, Value>
    private let transaction: ReadTransaction
    /// `nil` when the collection does not exist in the transaction's snapshot: the cursor is empty.
    private let cursor: RangeCursor?

    init(collection: KVCollection<Key, Value>, transaction: ReadTransaction, cursor: RangeCursor?) {
        self.collection = collection
        self.transaction = transaction
        self.cursor = cursor
    }

    /// Closes the LMDB cursor now, rather than when the transaction ends.
    deinit { cursor?.close() }

    /// The next entry, decoded, or `nil` past the end of the range.
    ///
    /// - Throws: ``KVStoreError/transactionEnded`` after the transaction's closure returned;
    ///   ``KVStoreError/corruptValue(collection:key:reason:underlying:)`` for a value that does not
    ///   decode, ``KVStoreError/invalidKey(collection:reason:)`` for a stored key that does not;
    ///   ``LMDBError``. The cursor stays where it was, so a later call goes on past a bad entry.
    public func next() throws -> (key: Key, value: Value)? {
        try transaction.checkActive()
        guard let cursor, let entry = try cursor.next() else { return nil }
        let key = try collection.decodeKey(entry.key)
        return (key, try collection.decode(entry.value, key: Array(entry.key)))
    }

    /// The next key, without decoding its value (which is not even read from the map), or `nil` past
    /// the end of the range.
    public func nextKey() throws -> Key? {
        try transaction.checkActive()
        guard let cursor, let entry = try cursor.next() else { return nil }
        return try collection.decodeKey(entry.key)
    }

    /// Calls `body` with each remaining entry, in the cursor's order. To stop early, step with
    /// ``next()`` and `break`.
    public func forEach(_ body: (Key, Value) throws -> Void) throws {
        while let (key, value) = try next() { try body(key, value) }
    }
}
