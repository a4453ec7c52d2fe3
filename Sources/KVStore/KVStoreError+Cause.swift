extension KVStoreError {
    /// The error underneath a ``KVStoreError/corruptValue(collection:key:reason:underlying:)``: what
    /// the codec threw (a ``CBORError``, a `DecodingError`, a ``FixedLayoutError``…), kept whole so
    /// that a caller can match on it or log it.
    ///
    /// ```swift
    /// } catch let error as KVStoreError {
    ///     if let cbor = error.underlyingError as? CBORError { … }
    /// }
    /// ```
    ///
    /// Two causes are equal when their errors have the same type and the same description, which
    /// keeps ``KVStoreError`` `Hashable`.
    public struct Cause: Hashable, Sendable, CustomStringConvertible {
        /// The error itself.
        public let error: any Error

        public init(_ error: any Error) {
            self.error = error
        }

        public var description: String { "\(error)" }

        public static func == (lhs: Cause, rhs: Cause) -> Bool {
            ObjectIdentifier(type(of: lhs.error)) == ObjectIdentifier(type(of: rhs.error)) && lhs.description == rhs.description
        }

        public func hash(into hasher: inout Hasher) {
            hasher.combine(ObjectIdentifier(type(of: error)))
            hasher.combine(description)
        }
    }

    /// The error a ``corruptValue(collection:key:reason:underlying:)`` came from, if it has one;
    /// `nil` for every other case.
    public var underlyingError: (any Error)? {
        if case .corruptValue(_, _, _, let cause?) = self { return cause.error }
        return nil
    }
}
