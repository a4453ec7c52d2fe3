/// The type-erased face of a ``SecondaryIndex``, so one collection can have indexes with different key types.
public protocol IndexDefinition<Value>: Sendable {
    associatedtype Value
    var name: String { get }
    var keyEncoding: KeyEncoding { get }
    /// The encoded index key (non-terminal form), or `nil` to leave the value out.
    func indexPrefix(for value: Value) -> [UInt8]?
    /// How many leading bytes of a stored index entry are the index key (the rest is the primary key).
    func indexKeyLength(in entry: UnsafeRawBufferPointer) -> Int?
}
