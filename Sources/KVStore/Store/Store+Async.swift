extension Store {
    /// Runs `body` in a read transaction on the process's blocking pool (``BlockingPool``), without
    /// holding a thread of Swift's cooperative pool.
    ///
    /// ```swift
    /// let alice = try await store.read { tx in try scores.get("alice", in: tx) }
    /// ```
    ///
    /// The same as ``read(_:)`` otherwise: the transaction is valid only during `body`, so copy out
    /// what you return. If the task is cancelled before the transaction begins, it does not begin and
    /// this throws `CancellationError`; once begun, it runs to the end.
    ///
    /// - Throws: whatever ``read(_:)`` throws, or `CancellationError`.
    public func read<R: Sendable>(_ body: @escaping @Sendable (ReadTransaction) throws -> R) async throws -> R {
        try await BlockingPool.shared.run { try self.read(body) }
    }

    /// Runs `body` in a write transaction on the process's blocking pool: waiting for the writer lock, which
    /// another process may hold for as long as it likes, never holds a thread of Swift's cooperative
    /// pool, so the rest of the program's tasks go on meanwhile.
    ///
    /// ```swift
    /// try await store.write(author: "app") { tx in try scores.put(43, forKey: "alice", in: tx) }
    /// ```
    ///
    /// The same as ``write(author:_:)`` otherwise (commits when `body` returns, aborts when it throws,
    /// may run `body` more than once). Async writes of one store in one process run one after another
    /// on a lane of the pool, so however many wait, they block one thread. If the task is cancelled before
    /// the transaction begins, it does not begin and this throws `CancellationError`; a write that
    /// began (waiting for the lock included) runs to the end.
    ///
    /// - Throws: whatever ``write(author:_:)`` throws, or `CancellationError`.
    public func write<R: Sendable>(author: String? = nil,
                                   _ body: @escaping @Sendable (WriteTransaction) throws -> R) async throws -> R {
        try await environment.writerLane.run { try self.write(author: author, body) }
    }
}
