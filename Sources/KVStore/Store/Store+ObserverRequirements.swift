/// Requirements that writes to a collection or defaults suite be seen by a write observer of a given
/// kind, in every process.
///
/// A hook such as SyncKit's history only works if every process that writes has it installed: a
/// process without it would commit changes that the history never records. So the hook records a
/// requirement in the store (``requireObserver(kind:for:in:)``), and every ``write(author:_:)`` that
/// touches that collection or suite without an observer of that kind (``WriteObserver/observerKind``)
/// fails with ``KVStoreError/observerRequired(target:kind:)`` and changes nothing.
///
/// Requirements live in the LMDB database `_requirements` (key `c/<collection>` or `d/<suite>`, value
/// the kind's UTF-8 bytes), so every process sees the same ones.
extension Store {
    static let requirementsDatabaseName = "_requirements"

    /// Requires a write observer of `kind` for every write to `target`, from now on and in every process.
    public func requireObserver(kind: String, for target: Mutation.Target, in transaction: WriteTransaction) throws {
        try Catalog.validateName(kind, what: "observer kind")
        guard let database = requirementsDatabase else { throw KVStoreError.readOnly(path: directory) }
        try transaction.put(database, Self.requirementKey(target), Array(kind.utf8))
        transaction.observerRequirements[target] = nil
    }

    /// Lifts the requirement on `target`, if there is one.
    public func removeObserverRequirement(for target: Mutation.Target, in transaction: WriteTransaction) throws {
        guard let database = requirementsDatabase else { throw KVStoreError.readOnly(path: directory) }
        try transaction.delete(database, Self.requirementKey(target))
        transaction.observerRequirements[target] = nil
    }

    /// The kind of write observer that writes to `target` require, or `nil`. Inside a write
    /// transaction the answer is looked up once per target (the store's own check and the observers'
    /// share it).
    public func observerRequirement(for target: Mutation.Target, in transaction: ReadTransaction) throws -> String? {
        let write = transaction as? WriteTransaction
        if let cached = write?.observerRequirements[target] { return cached }
        var kind: String?
        if let database = requirementsDatabase, let bytes = try transaction.get(database, Self.requirementKey(target)) {
            kind = String(decoding: bytes, as: UTF8.self)
        }
        write?.observerRequirements[target] = .some(kind)
        return kind
    }

    /// Throws if `transaction` wrote to a target whose required observer kind is not in `present`.
    func checkObserverRequirements(of transaction: WriteTransaction, present: Set<String>) throws {
        guard requirementsDatabase != nil, !transaction.mutations.isEmpty else { return }
        var checked = Set<Mutation.Target>()
        for mutation in transaction.mutations where checked.insert(mutation.target).inserted {
            if let kind = try observerRequirement(for: mutation.target, in: transaction), !present.contains(kind) {
                throw KVStoreError.observerRequired(target: mutation.target.description, kind: kind)
            }
        }
    }

    static func requirementKey(_ target: Mutation.Target) -> [UInt8] {
        switch target {
        case .collection(let name): Catalog.key(name, kind: .collection)
        case .defaults(let name): Catalog.key(name, kind: .defaults)
        }
    }
}
