extension KVStoreError {
    /// A read or a write transaction, as ``KVStoreError/nestedTransaction(outer:inner:)`` names them.
    public enum TransactionKind: String, Hashable, Sendable, CustomStringConvertible {
        /// ``Store/read(_:)``.
        case read
        /// ``Store/write(author:_:)``.
        case write

        public var description: String { rawValue }
    }
}
