/// What a committed write transaction changed, as handed to ``WriteObserver/transactionDidCommit(_:)``.
public struct CommittedTransaction: Sendable {
    public var transactionID: Int
    public var author: String?
    public var mutations: [Mutation]
}
