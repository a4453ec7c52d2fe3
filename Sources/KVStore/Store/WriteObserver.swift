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
