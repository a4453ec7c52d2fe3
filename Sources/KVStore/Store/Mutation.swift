/// One put or delete made in a write transaction.
public struct Mutation: Hashable, Sendable {
    public enum Operation: String, Hashable, Sendable, Codable {
        case put, delete
    }

    /// Where the mutation happened.
    public enum Target: Hashable, Sendable, CustomStringConvertible {
        /// A collection, by name.
        case collection(String)
        /// A ``SharedDefaults`` suite, by name.
        case defaults(String)

        /// A target of `kind` named `name`.
        public init(kind: CatalogEntry.Kind, name: String) {
            switch kind {
            case .collection: self = .collection(name)
            case .defaults: self = .defaults(name)
            }
        }

        /// Whether it is a collection or a defaults suite, as the catalog says it (`kind.rawValue` is
        /// the text history entries and replication record).
        public var kind: CatalogEntry.Kind {
            switch self {
            case .collection: .collection
            case .defaults: .defaults
            }
        }

        /// The collection or suite name.
        public var name: String {
            switch self {
            case .collection(let name), .defaults(let name): name
            }
        }

        /// `collection 'name'` or `defaults suite 'name'`.
        public var description: String {
            switch self {
            case .collection(let name): "collection '\(name)'"
            case .defaults(let name): "defaults suite '\(name)'"
            }
        }
    }

    public var target: Target
    /// The stored key bytes (decode them with the collection's key type, or render them with its
    /// ``KeyEncoding``; for defaults suites they are the UTF-8 key).
    public var key: [UInt8]
    public var operation: Operation

    public init(target: Target, key: [UInt8], operation: Operation) {
        self.target = target
        self.key = key
        self.operation = operation
    }
}
