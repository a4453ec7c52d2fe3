/// A secondary index of a collection, maintained in the same transaction as every put and delete.
///
/// ```swift
/// // BillingEvent by (subscriptionId, billedAt)
/// let bySubscription = SecondaryIndex<BillingEvent, Pair<UUID, Date>>("bySubscription") {
///     Pair($0.subscriptionId, $0.billedAt)
/// }
/// let events = try store.collection("billingEvents", key: UUID.self, value: BillingEvent.self,
///                                   indexes: [bySubscription])
/// let march = try store.read { tx in
///     try events.entries(in: bySubscription, prefix: subscriptionID, in: tx)
/// }
/// ```
///
/// Index keys need not be unique: each index entry is the index key followed by the primary key, so
/// equal index keys come back in primary-key order. Return `nil` from the key function to leave a
/// value out of the index. An index added to an existing collection is built when the collection is
/// opened; one that is no longer declared is dropped.
public struct SecondaryIndex<Value, IndexKey: OrderedKey>: IndexDefinition, Sendable {
    public let name: String
    let key: @Sendable (Value) -> IndexKey?

    public init(_ name: String, key: @escaping @Sendable (Value) -> IndexKey?) {
        self.name = name
        self.key = key
    }

    public var keyEncoding: KeyEncoding { IndexKey.keyEncoding }

    public func indexPrefix(for value: Value) -> [UInt8]? {
        guard let k = key(value) else { return nil }
        var bytes: [UInt8] = []
        k.encodeKey(into: &bytes, terminal: false)
        return bytes
    }

    public func indexKeyLength(in entry: UnsafeRawBufferPointer) -> Int? {
        var reader = KeyReader(entry)
        guard (try? IndexKey.decodeKey(from: &reader, terminal: false)) != nil else { return nil }
        return reader.offset
    }
}
