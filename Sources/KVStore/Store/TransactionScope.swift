#if canImport(Glibc)
import Glibc
#endif

/// The transactions of each environment that the current thread is inside: what lets
/// ``Store/read(_:)``, ``Store/write(author:_:)`` and
/// ``Store/collection(_:key:codec:schemaVersion:indexes:derived:aggregates:migrate:)`` refuse what must not
/// nest on one store, with a typed error and before LMDB is touched (see the DocC article
/// "Transactions").
///
/// Keyed by environment, not by ``Store``: two handles on one path share an environment, so they
/// share its rules. Transactions of *other* stores do not count here (``ThreadState`` counts those,
/// for ``KVStoreError/nestedWrite``).
struct TransactionScope {
    private let stack: Stack

    /// Enters a transaction of `kind` on `environment`. Throws
    /// ``KVStoreError/nestedTransaction(outer:inner:)`` if this thread is inside a write transaction
    /// of it, or inside any transaction of it when `kind` is `.write`. A read inside a read is
    /// allowed: both are snapshots, and neither blocks anything.
    init(_ kind: KVStoreError.TransactionKind, on environment: Environment) throws {
        let stack = Self.current
        let id = ObjectIdentifier(environment)
        if let outer = stack.innermostKind(of: id), outer == .write || kind == .write {
            throw KVStoreError.nestedTransaction(outer: outer, inner: kind)
        }
        stack.entries.append((id, kind))
        self.stack = stack
    }

    /// Leaves the transaction this scope entered (the innermost one).
    func end() {
        stack.entries.removeLast()
    }

    /// The kind of the innermost transaction of `environment` that this thread is inside, if any.
    static func innermostKind(of environment: Environment) -> KVStoreError.TransactionKind? {
        current.innermostKind(of: ObjectIdentifier(environment))
    }

    private final class Stack {
        // One per thread (a pthread key), never shared: no exclusivity check needed.
        @exclusivity(unchecked) var entries: [(environment: ObjectIdentifier, kind: KVStoreError.TransactionKind)] = []

        func innermostKind(of environment: ObjectIdentifier) -> KVStoreError.TransactionKind? {
            entries.last { $0.environment == environment }?.kind
        }
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in
            pointer.map { Unmanaged<Stack>.fromOpaque($0).release() }
        }
        return key
    }()

    private static var current: Stack {
        if let existing = pthread_getspecific(key) {
            return Unmanaged<Stack>.fromOpaque(existing).takeUnretainedValue()
        }
        let fresh = Stack()
        pthread_setspecific(key, Unmanaged.passRetained(fresh).toOpaque())
        return fresh
    }
}
