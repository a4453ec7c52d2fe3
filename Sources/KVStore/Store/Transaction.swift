/// A read-only view of the store at one point in time: every read through it sees the same committed
/// state, whatever other threads and processes commit meanwhile.
///
/// You get one from ``Store/read(_:)``. It is valid only during the execution of that closure: do
/// not keep it, and do not use it from another thread. Bytes handed to you by `withValueBytes`
/// methods are valid only until the closure that received them returns.
public class ReadTransaction {
    let pointer: OpaquePointer
    /// The store this transaction belongs to.
    public unowned let store: Store
    private(set) var isActive = true

    init(pointer: OpaquePointer, store: Store) {
        self.pointer = pointer
        self.store = store
    }

    func end() { isActive = false }

    @inline(__always)
    func checkActive() throws {
        if !isActive { throw KVStoreError.transactionEnded }
    }

}

/// A read-write transaction: everything done through it commits together when the closure given to
/// ``Store/write(author:_:)`` returns, or not at all if it throws.
///
/// Valid only during the execution of that closure. The closure may run more than once (when the map
/// has to grow, the transaction is aborted and run again), so keep its side effects inside the
/// transaction.
public final class WriteTransaction: ReadTransaction {
    /// Who is writing (`"app"`, `"extension"`, `"widget"`, `"kvtool"`…), as given to
    /// ``Store/write(author:_:)``. History records it.
    public let author: String?
    /// The puts and deletes made so far through collections and defaults suites, in order. Write
    /// observers read it in ``WriteObserver/transactionWillCommit(_:)``.
    public private(set) var mutations: [Mutation] = []
    /// Observer requirements already looked up in this transaction (see
    /// ``Store/observerRequirement(for:in:)``).
    var observerRequirements: [Mutation.Target: String?] = [:]
    /// Databases opened or created in this transaction: shared with the process once it commits.
    var openedDatabases: [String: DatabaseHandle] = [:]
    private var recording = true

    init(pointer: OpaquePointer, store: Store, author: String?) {
        self.author = author
        super.init(pointer: pointer, store: store)
    }

    /// Runs `body` without adding its writes to ``mutations``: for bookkeeping that observers write
    /// (history entries, for instance), which must not be observed as changes themselves.
    public func unrecorded<R>(_ body: () throws -> R) rethrows -> R {
        let saved = recording
        recording = false
        defer { recording = saved }
        return try body()
    }

    func record(_ mutation: Mutation) {
        if recording { mutations.append(mutation) }
    }
}

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

/// What a committed write transaction changed, as handed to ``WriteObserver/transactionDidCommit(_:)``.
public struct CommittedTransaction: Sendable {
    public var transactionID: Int
    public var author: String?
    public var mutations: [Mutation]
}

/// A hook in the store's write path. SyncKit's history is built on it.
///
/// ``transactionWillCommit(_:)`` runs inside the transaction, after your closure returned and before
/// LMDB commits: it can write more (with ``WriteTransaction/unrecorded(_:)``), and throwing aborts the
/// whole transaction. ``transactionDidCommit(_:)`` runs after the commit succeeded, on the thread that
/// committed.
public protocol WriteObserver: AnyObject, Sendable {
    /// The kind of hook this is (`"history"`, say), matched against the requirements recorded with
    /// ``Store/requireObserver(kind:for:in:)``. `nil` (the default) for hooks nothing depends on.
    var observerKind: String? { get }
    func transactionWillCommit(_ transaction: WriteTransaction) throws
    func transactionDidCommit(_ commit: CommittedTransaction)
}

extension WriteObserver {
    public var observerKind: String? { nil }
    public func transactionWillCommit(_ transaction: WriteTransaction) throws {}
    public func transactionDidCommit(_ commit: CommittedTransaction) {}
}
