import Dispatch

extension Store {
    /// Runs `body` in a read transaction on a thread of its own, without holding a thread of Swift's
    /// cooperative pool.
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
        try await AsyncTransactions.run(on: AsyncTransactions.readers) { try self.read(body) }
    }

    /// Runs `body` in a write transaction on a thread of its own: waiting for the writer lock, which
    /// another process may hold for as long as it likes, never holds a thread of Swift's cooperative
    /// pool, so the rest of the program's tasks go on meanwhile.
    ///
    /// ```swift
    /// try await store.write(author: "app") { tx in try scores.put(43, forKey: "alice", in: tx) }
    /// ```
    ///
    /// The same as ``write(author:_:)`` otherwise (commits when `body` returns, aborts when it throws,
    /// may run `body` more than once). Async writes of one store in one process run one after another
    /// on a serial queue, so however many wait, they block one thread. If the task is cancelled before
    /// the transaction begins, it does not begin and this throws `CancellationError`; a write that
    /// began (waiting for the lock included) runs to the end.
    ///
    /// - Throws: whatever ``write(author:_:)`` throws, or `CancellationError`.
    public func write<R: Sendable>(author: String? = nil,
                                   _ body: @escaping @Sendable (WriteTransaction) throws -> R) async throws -> R {
        try await AsyncTransactions.run(on: environment.writerQueue) {
            try self.write(author: author, body)
        }
    }
}

/// The dispatch queues async transactions run on.
enum AsyncTransactions {
    /// Writes run on their environment's serial queue (``Environment/writerQueue``), released with it.
    ///
    /// Reads: concurrent, since they never wait for each other.
    static let readers = DispatchQueue(label: "KVStore.read", qos: .userInitiated, attributes: .concurrent)
    /// Runs `work` on `queue` and resumes the calling task with its result.
    static func run<R: Sendable>(on queue: DispatchQueue, _ work: @escaping @Sendable () throws -> R) async throws -> R {
        let cancelled = Locked(false)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<R, any Error>) in
                queue.async {
                    if cancelled.withLock({ $0 }) {
                        continuation.resume(throwing: CancellationError())
                    } else {
                        continuation.resume(with: Result { try work() })
                    }
                }
            }
        } onCancel: {
            cancelled.withLock { $0 = true }
        }
    }
}
