/// An error raised by KVStore itself, as opposed to a code from LMDB (``LMDBError``).
///
/// Each case's ``description`` is one line that names the problem and what it concerns, so that a
/// command-line tool can print it as it is.
public enum KVStoreError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The App Group identifier is not of the form `group.<reverse DNS>`.
    case invalidGroupIdentifier(String, reason: String)
    /// A relative path for ``SharedFiles`` (or a root directory) was rejected.
    case invalidPath(String, reason: String)
    /// A collection, index or defaults-suite name was rejected.
    case invalidName(String, reason: String)
    /// A key could not be encoded or decoded for its collection.
    case invalidKey(collection: String, reason: String)
    /// Stored bytes failed to decode. `key` is the key rendered for people; `reason` is one line;
    /// `underlying` is the error the codec threw, when there is one (a stored value over its size limit
    /// has none). See also ``underlyingError``.
    case corruptValue(collection: String, key: String, reason: String, underlying: Cause? = nil)
    /// A value could not be encoded.
    case encodingFailed(collection: String, reason: String)
    /// A value is larger than the limit that applies to it.
    case valueTooLarge(what: String, size: Int, limit: Int, hint: String)
    /// The collection exists with a different key or value encoding than the one asked for.
    case catalogMismatch(collection: String, detail: String)
    /// The collection was written by a newer schema version than this code knows.
    case schemaTooNew(collection: String, stored: Int, supported: Int)
    /// No collection of that name is in the catalog.
    case collectionNotFound(String)
    /// A write was attempted through a read-only store.
    case readOnly(path: String)
    /// A transaction was begun on a store after ``Store/close()``.
    case closed(path: String)
    /// `write { }` was called on one store while the same thread holds a write transaction of another
    /// store. (On the same store, it is ``nestedTransaction(outer:inner:)``.)
    case nestedWrite
    /// A transaction was begun inside a transaction of the same store on the same thread, where the
    /// rules forbid it: any transaction inside a write (a read there would not see the write's own
    /// changes; use the ``WriteTransaction``, which is a ``ReadTransaction``), and a write inside a
    /// read (it could wait for itself when the map has to change size). A read inside a read is
    /// allowed. Thrown before LMDB is touched. See the DocC article "Transactions".
    case nestedTransaction(outer: TransactionKind, inner: TransactionKind)
    /// ``Store/collection(_:key:value:schemaVersion:indexes:derived:aggregates:migrate:)`` was called inside a
    /// transaction of the same store on the same thread. Opening a collection may read and write the
    /// catalog in transactions of its own. Fix: open collections before `read { }` or `write { }`, and
    /// keep the handles (they are small values, valid in every transaction of their store).
    case collectionOpenedInsideTransaction(String)
    /// The store at `path` is already open in this process with options that cannot differ between
    /// two handles on one environment (`detail` names the option and both values). LMDB allows one
    /// environment per path per process, so the second open would silently get the first one's.
    /// See ``Store/Options``.
    case conflictingOptions(path: String, detail: String)
    /// A collection or defaults suite was first opened inside a transaction. LMDB lets a transaction
    /// use only the named databases that were open in the process when it began. ``Store/read(_:)``
    /// and ``Store/write(author:_:)`` recover by themselves when the database exists (they open it and
    /// run the closure again), so you see this only for a collection that does not exist yet or inside
    /// nested transactions. Fix: open collections
    /// (``Store/collection(_:key:value:schemaVersion:indexes:derived:aggregates:migrate:)``) and suites
    /// (``SharedContainer/defaults(suite:)``) before `read { }` or `write { }`.
    case databaseOpenedInsideTransaction(String)
    /// A write touched a collection or suite that requires a write observer of `kind` (see
    /// ``Store/requireObserver(kind:for:in:)``), and this process has none registered. Nothing was
    /// written. Fix: register the observer before writing (for `history`, SyncKit's
    /// `History.attach(to:)`).
    case observerRequired(target: String, kind: String)
    /// A transaction, cursor or collection handle was used after its closure returned.
    case transactionEnded
    /// The map would have to grow past ``Store/Options/maxMapSize``.
    case mapLimitReached(limit: Int)
    /// A value handed to ``SharedDefaults`` is not a property-list type.
    case notAPropertyList(key: String, type: String)
    /// A file in ``SharedFiles`` does not exist.
    case fileNotFound(path: String)
    /// A file or directory of the container (or of a store, a snapshot, a feed) is not what it must
    /// be: a symbolic link or hard link someone planted, a FIFO or device, a wrong owner, group or mode
    /// that this process may not repair. Nothing was opened through it, and it was left untouched.
    /// See the DocC article "Sharing a store between processes" for the rules.
    case unsafeFile(path: String, reason: String)
    /// The environment records a map size larger than ``Store/Options/maxMapSize``: some process grew
    /// (or another program set) it past what this process accepts to map. Nothing was mapped.
    case mapSizeOverLimit(path: String, recorded: Int, limit: Int)
    /// `data.mdb` ends before a page its newest transaction reaches (truncated by another process, a
    /// full disk or a bad copy): reading that page would fault (`SIGBUS`). `missingPage` is the lowest
    /// such page, of `pageSize` bytes. (A file that is merely shorter than its meta page's last page
    /// opens: LMDB leaves pages it freed before writing them out of the file.)
    case truncatedStore(path: String, size: Int, missingPage: Int, pageSize: Int)
    /// A system call failed. `errno` is the C error number.
    case io(operation: String, path: String, errno: Int32)

    public var description: String {
        switch self {
        case .invalidGroupIdentifier(let id, let reason):
            "invalid group identifier \(Self.quote(id)): \(reason)"
        case .invalidPath(let path, let reason):
            "invalid path \(Self.quote(path)): \(reason)"
        case .invalidName(let name, let reason):
            "invalid name \(Self.quote(name)): \(reason)"
        case .invalidKey(let collection, let reason):
            "invalid key for collection '\(collection)': \(reason)"
        case .corruptValue(let collection, let key, let reason, _):
            "corrupt value in '\(collection)' at key \(key): \(reason)"
        case .encodingFailed(let collection, let reason):
            "cannot encode value for '\(collection)': \(reason)"
        case .valueTooLarge(let what, let size, let limit, let hint):
            "\(what) is \(size) bytes, over the \(limit)-byte limit" + (hint.isEmpty ? "" : "; \(hint)")
        case .catalogMismatch(let collection, let detail):
            "collection '\(collection)' does not match the catalog: \(detail)"
        case .schemaTooNew(let collection, let stored, let supported):
            "collection '\(collection)' has schema version \(stored), newer than the \(supported) this program supports"
        case .collectionNotFound(let name):
            "no collection named '\(name)'"
        case .closed(let path):
            "the store at \(path) is closed"
        case .readOnly(let path):
            "the store at \(path) is open read-only"
        case .nestedWrite:
            "write transaction started inside another write transaction on the same thread"
        case .nestedTransaction(let outer, let inner):
            "\(inner) transaction started inside a \(outer) transaction of the same store on the same thread"
                + (outer == .write ? "; use the write transaction" : "; do the write outside the read")
        case .collectionOpenedInsideTransaction(let name):
            "collection '\(name)' opened inside a transaction; open collections before read { } or write { }"
        case .conflictingOptions(let path, let detail):
            "the store at \(path) is already open in this process with other options: \(detail)"
        case .databaseOpenedInsideTransaction(let database):
            "database '\(database)' was first opened inside a transaction; open the collection or suite before read { } or write { }"
        case .observerRequired(let target, let kind):
            "\(target) requires a '\(kind)' write observer in every process that writes to it, and this one has none; register it before writing"
        case .transactionEnded:
            "a transaction was used after its closure returned"
        case .mapLimitReached(let limit):
            "the store is full: the map cannot grow past its limit of \(limit) bytes"
        case .notAPropertyList(let key, let type):
            "value for key '\(key)' has type \(type), which is not a property-list type; use set(encodable:forKey:)"
        case .fileNotFound(let path):
            "no such file: \(path)"
        case .unsafeFile(let path, let reason):
            "refusing \(path): \(reason)"
        case .mapSizeOverLimit(let path, let recorded, let limit):
            "the store at \(path) records a map of \(recorded) bytes, over this process's limit of \(limit) bytes (maxMapSize)"
        case .truncatedStore(let path, let size, let page, let pageSize):
            "the store file \(path) was truncated: it is \(size) bytes, but its newest transaction reaches page \(page)"
                + (page.multipliedReportingOverflow(by: pageSize).overflow ? "" : ", which starts at byte \(page * pageSize)")
        case .io(let operation, let path, let code):
            "\(operation) \(path): \(String(cString: strerror(code)))"
        }
    }

    /// Quotes a string for an error message, keeping control characters and NULs visible.
    public static func quote(_ s: String) -> String { Escaping.messageQuote(s) }
}

#if canImport(Glibc)
import Glibc
#endif
