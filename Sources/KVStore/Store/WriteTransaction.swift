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
    /// What ``afterCommit(_:)`` registered, in order.
    private(set) var commitActions: [() -> Void] = []
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

    /// Runs `action` once this transaction has committed, on the thread that committed, after the
    /// store's write observers and outside every transaction of the store (so `action` may read or
    /// write it). Nothing runs if the transaction aborts, or when its closure runs again (a map that
    /// grew): the run that commits registers its own. What `SharedFiles` publishes in `Files/` when a
    /// write of a file commits (``SharedFiles/write(_:to:in:modified:)-(Data,_,_,_)``) is such an
    /// action, as GRDB's `afterNextTransaction(onCommit:)` is.
    ///
    /// ```swift
    /// try store.write { tx in
    ///     try trainers.put(trainer, forKey: id, in: tx)
    ///     tx.afterCommit { print("saved") }
    /// }
    /// ```
    public func afterCommit(_ action: @escaping () -> Void) {
        commitActions.append(action)
    }

    func record(_ mutation: Mutation) {
        if recording { mutations.append(mutation) }
    }
}
