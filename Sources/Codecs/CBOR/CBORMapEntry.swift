/// One key–value pair of a ``CBORValue/map(_:)``.
public struct CBORMapEntry: Hashable, Sendable {
    /// The key: any data item, usually a text string or an integer.
    public var key: CBORValue
    /// The value.
    public var value: CBORValue

    /// Creates an entry.
    public init(key: CBORValue, value: CBORValue) {
        self.key = key
        self.value = value
    }
}
