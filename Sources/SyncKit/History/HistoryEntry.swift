#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

/// One recorded mutation: a put or delete of one key in one collection or defaults suite.
///
/// Entries are written by ``History`` in the same transaction as the mutation they describe, so a
/// committed change always has its entry and an aborted one never does.
public struct HistoryEntry: Codable, Hashable, Sendable {
    /// The entry's sequence number. Consecutive across all processes; never reused.
    public var token: ChangeToken
    /// LMDB's id of the transaction that made the change. Entries of one transaction are consecutive.
    public var transactionID: Int
    /// Who wrote (`"app"`, `"extension"`, `"widget"`, `"kvtool"`…), as passed to
    /// `Store.write(author:_:)`; `nil` if the writer gave none.
    public var author: String?
    /// When the transaction was about to commit.
    public var timestamp: Date
    /// `"collection"` or `"defaults"`.
    public var kind: String
    /// The collection or suite name.
    public var name: String
    /// The stored key bytes. Decode them with ``decodeKey(as:)`` or render them with the catalog's
    /// `KeyEncoding`; for a defaults suite they are the key's UTF-8 bytes.
    public var key: [UInt8]
    public var operation: Mutation.Operation
    /// The transaction's hybrid logical clock stamp (``HybridTimestamp``): every entry of a transaction
    /// has the same. `nil` in entries recorded before stamps existed.
    public var clock: HybridTimestamp?

    public init(token: ChangeToken, transactionID: Int, author: String?, timestamp: Date,
                target: Mutation.Target, key: [UInt8], operation: Mutation.Operation, clock: HybridTimestamp? = nil) {
        self.token = token
        self.transactionID = transactionID
        self.author = author
        self.timestamp = timestamp
        (kind, name) = (target.kind.rawValue, target.name)
        self.key = key
        self.operation = operation
        self.clock = clock
    }

    /// Where the change happened.
    public var target: Mutation.Target {
        Mutation.Target(kind: CatalogEntry.Kind(rawValue: kind) ?? .collection, name: name)
    }

    /// The key decoded as the collection's key type.
    ///
    /// - Throws: `KeyDecodingError` if the bytes are not a `Key`.
    public func decodeKey<Key: OrderedKey>(as type: Key.Type = Key.self) throws -> Key {
        try Key.decodeKey(key)
    }
}

/// The entries one committed transaction recorded, in order.
public struct HistoryTransaction: Hashable, Sendable {
    public var transactionID: Int
    public var author: String?
    public var timestamp: Date
    /// At least one entry; tokens are consecutive.
    public var entries: [HistoryEntry]

    /// The token of the transaction's last entry: pass it to ``History/changes(since:matching:)`` to
    /// continue after this transaction.
    public var lastToken: ChangeToken { entries[entries.count - 1].token }
}
