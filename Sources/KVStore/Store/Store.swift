#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// A typed key-value store on one LMDB environment, shared safely by threads and by processes.
///
/// ```swift
/// let store = try Store(directory: "/tmp/demo")
/// let scores = try store.collection("scores", key: String.self, value: Int.self)
/// try store.write { tx in try scores.put(42, forKey: "alice", in: tx) }
/// let alice = try store.read { tx in try scores.get("alice", in: tx) }   // 42
/// ```
///
/// Transactions are closures: ``read(_:)`` and ``write(author:_:)`` commit when the closure returns
/// and abort when it throws. Readers never block writers or each other, in this or any other process.
/// In a ``SharedContainer`` you get the store as ``SharedContainer/store``.
///
/// A `Store` is safe to use from any thread. Opening the same directory twice in one process returns
/// handles on the same LMDB environment, so the options that cannot differ between them must agree
/// (see ``KVStoreError/conflictingOptions(path:detail:)``). The DocC article "Transactions" gives the
/// rules of `read { }` and `write { }`.
public final class Store: @unchecked Sendable {
    // `@unchecked Sendable` for one property: `idleReadTransaction` caches a `ReadTransaction` (not
    // Sendable), handed to one thread at a time by an atomic exchange (no lock: whoever takes it owns
    // it until it puts it back). The rest is constants, `Locked` values and atomics.

    /// LMDB's limit on the size of a key, in bytes (`mdb_env_get_maxkeysize` with LMDB's default
    /// `MDB_MAXKEYSIZE`): the largest key, index entry (index key + primary key) or database name.
    public static let maxKeySize = 511

    /// How a store is opened.
    public struct Options: Sendable {
        /// The initial map size in bytes. The map grows by itself when it fills up, so a small value
        /// only costs a few remaps. Default 16 MiB.
        public var mapSize: Int = 16 << 20
        /// The map never grows past this, and a larger size recorded in the store by another process
        /// is refused at open (``KVStoreError/mapSizeOverLimit(path:recorded:limit:)``) rather than
        /// mapped. Default 64 GiB.
        public var maxMapSize: Int = 64 << 30
        /// See ``Durability``. Default ``Durability/durable``.
        public var durability: Durability = .durable
        /// Opens the environment with `MDB_RDONLY`: writes throw ``KVStoreError/readOnly(path:)``.
        /// The lock file must still be writable, because readers register in it.
        public var readOnly = false
        /// Permissions of `data.mdb` and `lock.mdb`. Default `0600`.
        public var fileMode: Glibc.mode_t = 0o600
        /// LMDB's reader table size (`mdb_env_set_maxreaders`). Default 126.
        public var maxReaders: UInt32 = 126
        /// Named databases, including indexes and defaults suites (`mdb_env_set_maxdbs`). Default 512.
        public var maxDatabases: UInt32 = 512
        /// Whether opening clears the reader slots of dead processes (`mdb_reader_check`). Default
        /// `true`; tools that want to *show* stale slots (`kvtool readers`) turn it off. It applies
        /// only to the first open of a path in a process, and never to a ``readOnly`` open: a widget
        /// or an extension does no scan at start-up, and leaves stale slots to the writers, which
        /// clear them before writing (``staleReaderCheckInterval``). A reader that finds the table
        /// full clears it then, and tries once more.
        public var clearStaleReadersOnOpen = true
        /// How often, at most, a write transaction first clears the reader slots of processes that died
        /// (`mdb_reader_check`); `nil` clears them only on open and when the map fills up. Default 1
        /// second.
        ///
        /// A reader that died holding a transaction pins the transaction it was reading: until its slot is
        /// cleared, LMDB cannot reuse any page freed after that transaction, and the file grows with every
        /// commit. A long-running writer would otherwise wait for some other process to open the store.
        /// The check reads the reader table and probes each reader's process, a few microseconds.
        public var staleReaderCheckInterval: Duration? = .seconds(1)
        /// Where the store reports what an operator may want to know, and nothing else: the map growing
        /// (`notice`), stale reader slots cleared at open or before a write (`notice`), a write run
        /// again and a map size adopted from another process (`info`). Each message carries the
        /// store's `path` as metadata.
        ///
        /// Default: a logger that discards everything, since a library stays silent unless asked. Pass
        /// `Logger(label: "com.example.app.store")` to log through the `LoggingSystem` your program
        /// bootstraps. The environment is shared by every handle on its path in a process, so the
        /// logger of the first open is the one used.
        public var logger = Options.silentLogger
        /// Set by ``init(copyFile:)``: the path is one immutable LMDB file, opened read-only
        /// without a lock file.
        var immutableFile = false

        public init() {}
    }

    let environment: Environment
    /// Keeps ``environment`` registered and open for as long as this store exists.
    private let lease: EnvironmentLease
    /// The directory holding `data.mdb` and `lock.mdb`.
    public let directory: String
    /// The options this store was opened with.
    public let options: Options
    let catalogDatabase: DatabaseHandle?
    /// See ``requireObserver(kind:for:in:)``; `nil` in a read-only store that has none.
    let requirementsDatabase: DatabaseHandle?
    private let observers = Locked<[any WriteObserver]>([])
    /// Set by ``close()``: every transaction begun after it throws ``KVStoreError/closed(path:)``.
    private let isClosed = Atomic<Bool>(false)
    /// A `ReadTransaction` object that the last read left behind, taken by the next one instead of
    /// allocating another (see ``read(_:)``): allocating and freeing it cost about 260 of the 4,600
    /// instructions a defaults get took then.
    private let idleReadTransaction = Atomic<Unmanaged<ReadTransaction>?>(nil)

    /// Opens (creating if needed, unless read-only) the store in `directory`, which must exist.
    ///
    /// `directory` must not itself be a symbolic link, and its `data.mdb` and `lock.mdb` are opened
    /// without following links and checked before LMDB maps them: a link, a second hard link, a file
    /// owned by another user (another group, when ``Options/fileMode`` has group bits) or a mode this
    /// process may not repair is refused (see the DocC article "Sharing a store between processes").
    ///
    /// - Throws: ``LMDBError`` if LMDB cannot open the environment;
    ///   ``KVStoreError/unsafeFile(path:reason:)`` for a file the checks refuse;
    ///   ``KVStoreError/invalidPath(_:reason:)`` when `directory` is a symbolic link;
    ///   ``KVStoreError/mapSizeOverLimit(path:recorded:limit:)`` when the store records a map larger
    ///   than ``Options/maxMapSize``; ``KVStoreError/truncatedStore(path:size:missingPage:pageSize:)``
    ///   when `data.mdb` ends before a page its newest transaction reaches.
    public convenience init(directory: String, options: Options = Options()) throws {
        try self.init(directory: directory, descriptor: nil, options: options)
    }

    init(directory: String, descriptor: Int32?, options: Options) throws {
        self.options = options
        let configuration = Environment.Configuration(
            mapSize: options.mapSize, maxMapSize: options.maxMapSize,
            maxReaders: options.maxReaders, maxDatabases: options.maxDatabases,
            durability: options.durability, readOnly: options.readOnly || options.immutableFile,
            fileMode: options.fileMode, immutableFile: options.immutableFile,
            clearStaleReadersOnOpen: options.clearStaleReadersOnOpen,
            staleReaderCheckInterval: options.staleReaderCheckInterval,
            logger: options.logger
        )
        lease = try Environment.open(directory: directory, descriptor: descriptor, configuration: configuration)
        environment = lease.environment
        try Self.adoptStrongestDurability(environment, options)
        self.directory = environment.directory
        catalogDatabase = try environment.database(named: Catalog.databaseName, create: !options.readOnly)
        requirementsDatabase = try environment.database(named: Self.requirementsDatabaseName, create: !options.readOnly)
    }

    /// Whether writes are refused: this handle was opened with ``Options/readOnly``, or the process
    /// opened the environment read-only first.
    public var isReadOnly: Bool { options.readOnly || environment.configuration.readOnly }

    // MARK: - Transactions

    /// Runs `body` in a read transaction: a consistent view of the store at one committed transaction.
    ///
    /// The transaction is valid only during the execution of `body`. Reading never blocks, and is
    /// never blocked by, writers in this or another process.
    ///
    /// If `body` reaches a collection that another process created after this process opened its
    /// handle, the transaction cannot use it (LMDB allows only databases open when a transaction
    /// began): the store opens it and runs `body` again in a new transaction, once per such collection.
    ///
    /// A read inside a read of the same store is allowed (it is a snapshot of its own, possibly newer);
    /// a read inside a write of the same store is not (it would not see the write's changes): read
    /// through the ``WriteTransaction``, which is a ``ReadTransaction``.
    ///
    /// - Throws: whatever `body` throws; ``KVStoreError/nestedTransaction(outer:inner:)`` inside a
    ///   write transaction of this store on this thread, before LMDB is touched; ``LMDBError``.
    public func read<R>(_ body: (ReadTransaction) throws -> R) throws -> R {
        if isClosed.load(ordering: .relaxed) { throw KVStoreError.closed(path: directory) }
        let scope = try TransactionScope(.read, on: environment)
        defer { scope.end() }
        // What `openingNewDatabases` does, written out: one loop, without a closure per layer, costs a
        // read about 200 instructions less (retains and releases of the closures' contexts).
        var opened: Set<String> = []
        while true {
            do {
                let pointer = try environment.beginRead()
                defer { environment.endRead(pointer) }
                var transaction = takeReadTransaction(pointer)
                defer { giveBack(&transaction) }
                return try body(transaction)
            } catch KVStoreError.databaseOpenedInsideTransaction(let name) where !opened.contains(name) && !ThreadState.isInTransaction {
                try openDatabaseMetInTransaction(name)
                opened.insert(name)
            }
        }
    }

    /// A `ReadTransaction` over `pointer`: the one the last read left behind, or a new one.
    @inline(__always)
    private func takeReadTransaction(_ pointer: OpaquePointer) -> ReadTransaction {
        if let idle = idleReadTransaction.exchange(nil, ordering: .acquiring) {
            let transaction = idle.takeRetainedValue()
            transaction.begin(pointer: pointer)
            return transaction
        }
        return ReadTransaction(pointer: pointer, store: self)
    }

    /// Ends `transaction`, and keeps it for the next read if nobody else holds it: one kept past its
    /// closure stays ended, so using it throws `transactionEnded` instead of reading another snapshot.
    @inline(__always)
    private func giveBack(_ transaction: inout ReadTransaction) {
        transaction.end()
        guard isKnownUniquelyReferenced(&transaction) else { return }
        let idle = Unmanaged.passRetained(transaction)
        if !idleReadTransaction.compareExchange(expected: nil, desired: idle, ordering: .releasing).exchanged {
            idle.release()
        }
    }

    deinit {
        idleReadTransaction.exchange(nil, ordering: .acquiring)?.release()
    }

    /// Runs `body` in a write transaction: committed when `body` returns, aborted if it throws.
    ///
    /// Writers are serialised, across processes too. Write observers see the mutations before and
    /// after commit.
    ///
    /// **`body` may run more than once.** When the map fills up, the transaction is aborted, the map
    /// grows, and `body` runs again from the start in a new transaction; the same happens when `body`
    /// reaches a collection that another process created since this process opened its handle (see
    /// ``read(_:)``). Each run starts from the committed state, as if the aborted one never happened,
    /// and only the result of the run that commits is returned. So keep side effects inside the
    /// transaction: don't append to an outer array, send, or print from `body`; do it with the value
    /// `write` returns.
    ///
    /// Don't begin another transaction of this store inside `body`: read through `body`'s transaction.
    ///
    /// - Parameter author: Recorded with the mutations (history shows it). Defaults to none.
    /// - Throws: whatever `body` throws; ``KVStoreError/readOnly(path:)``;
    ///   ``KVStoreError/nestedTransaction(outer:inner:)`` if this thread is inside a transaction of this
    ///   store (read or write), before LMDB is touched; ``KVStoreError/nestedWrite`` if it is writing
    ///   another store; ``KVStoreError/mapLimitReached(limit:)``; or ``LMDBError`` (`noSpace`,
    ///   `ioError`…).
    public func write<R>(author: String? = nil, _ body: (WriteTransaction) throws -> R) throws -> R {
        if isReadOnly { throw KVStoreError.readOnly(path: directory) }
        if isClosed.load(ordering: .relaxed) { throw KVStoreError.closed(path: directory) }
        var actions: [() -> Void] = []
        let result = try writeInScope(author: author, actions: &actions, body)
        for action in actions { action() }
        return result
    }

    /// ``write(author:_:)`` inside its transaction scope; `actions` gets what the committed run
    /// registered with ``WriteTransaction/afterCommit(_:)``, run by the caller once the scope ended.
    private func writeInScope<R>(author: String?, actions: inout [() -> Void], _ body: (WriteTransaction) throws -> R) throws -> R {
        let scope = try TransactionScope(.write, on: environment)
        defer { scope.end() }
        let observers = self.observers.withLock { $0 }
        let observerKinds = Set(observers.compactMap(\.observerKind))
        var committed: CommittedTransaction?
        var opened: [String: DatabaseHandle] = [:]
        var registered: [() -> Void] = []
        let result = try openingNewDatabases { try environment.withWriteTransaction { pointer in
            let transaction = WriteTransaction(pointer: pointer, store: self, author: author)
            defer { transaction.end() }
            let result = try body(transaction)
            try checkObserverRequirements(of: transaction, present: observerKinds)
            for observer in observers { try observer.transactionWillCommit(transaction) }
            committed = CommittedTransaction(
                transactionID: transaction.transactionID, author: author, mutations: transaction.mutations)
            opened = transaction.openedDatabases
            registered = transaction.commitActions
            return result
        } }
        environment.cacheDatabases(opened)
        if let committed {
            for observer in observers { observer.transactionDidCommit(committed) }
            actions = registered
        }
        return result
    }

    /// Runs `attempt`, and again each time it fails on a database that exists but was not open in this
    /// process when its transaction began, after opening that database outside any transaction.
    private func openingNewDatabases<R>(_ attempt: () throws -> R) throws -> R {
        var opened: Set<String> = []
        while true {
            do {
                return try attempt()
            } catch KVStoreError.databaseOpenedInsideTransaction(let name)
                        where !opened.contains(name) && !ThreadState.isInTransaction {
                try openDatabaseMetInTransaction(name)
                opened.insert(name)
            }
        }
    }

    /// Opens the handle of a database that a transaction met but could not open (another process
    /// created it after this one opened its handles), before the transaction runs again. Called
    /// outside every transaction; if the database is gone again, the error stands.
    private func openDatabaseMetInTransaction(_ name: String) throws {
        guard try environment.database(named: name, create: false) != nil else {
            throw KVStoreError.databaseOpenedInsideTransaction(name)
        }
        environment.log(.info, "running the transaction again: it met a database another process created", ["database": "\(name)"])
    }

    /// Registers a hook in the write path of this process. See ``WriteObserver``.
    public func addObserver(_ observer: any WriteObserver) {
        observers.withLock { $0.append(observer) }
        keepWhileObserved()
    }

    /// The stores with write observers, kept until ``close()``: an observer may hold its store (a
    /// `History` does), and the store holds its observers, so such a store lives until the process
    /// exits unless it is closed. Held here, it stays reachable, as a process-wide object, rather than
    /// in a cycle nothing reaches (which a leak checker reports).
    private static let observed = Locked<[ObjectIdentifier: Store]>([:])

    private func keepWhileObserved() {
        guard !isClosed.load(ordering: .relaxed) else { return }
        Store.observed.withLock { $0[ObjectIdentifier(self)] = self }
    }

    /// Removes a hook added with ``addObserver(_:)``.
    public func removeObserver(_ observer: any WriteObserver) {
        observers.withLock { $0.removeAll { $0 === observer } }
    }

    /// The observer of `kind` registered in this process, or `observer`, registered now if there was
    /// none: one per kind, however many threads attach at once (SyncKit's `History.attach(to:)`).
    package func observer(ofKind kind: String, orAdding observer: @autoclosure () throws -> any WriteObserver) rethrows -> any WriteObserver {
        if let existing = observers.withLock({ $0.first { $0.observerKind == kind } }) { return existing }
        let made = try observer()
        return observers.withLock { observers in
            if let existing = observers.first(where: { $0.observerKind == kind }) { return existing }
            observers.append(made)
            keepWhileObserved()
            return made
        }
    }

    /// Closes this handle: every transaction begun on it from now on throws
    /// ``KVStoreError/closed(path:)``, and its write observers (a `History`, a change notifier) are
    /// removed, so that nothing it registered keeps it alive. Once your own references to it (and to
    /// its collections) are gone, the environment closes with the last handle of its path in this
    /// process: its memory map, file descriptors and writer queue are released.
    ///
    /// Optional: a store that is never closed lives until the process exits if it has write observers
    /// (they and the store hold each other, so the process keeps such a store), which is what an app's
    /// container does. Close the stores a long-running process opens and forgets (a server opening
    /// containers on demand, a test opening thousands). A transaction running on another thread
    /// finishes; calling it again does nothing.
    public func close() {
        guard !isClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        observers.withLock { $0.removeAll() }
        _ = Store.observed.withLock { $0.removeValue(forKey: ObjectIdentifier(self)) }
        idleReadTransaction.exchange(nil, ordering: .acquiring)?.release()
    }

    /// Whether ``close()`` was called.
    public var closed: Bool { isClosed.load(ordering: .relaxed) }

    /// Flushes to disk. Needed only with ``Durability/noSync`` (and, for the meta page,
    /// ``Durability/noMetaSync``); the corresponding LMDB call is `mdb_env_sync(env, 1)`.
    public func sync() throws {
        try environment.sync(force: true)
    }

    /// Clears reader slots left by processes that died while reading; returns how many. Opening a
    /// store does this already.
    @discardableResult
    public func clearStaleReaders() throws -> Int {
        try environment.clearStaleReaders()
    }

    /// How many stale reader slots were cleared when this process opened the environment (the first
    /// open of its path in this process); always 0 for a read-only open, which clears none.
    public var staleReadersClearedAtOpen: Int { environment.staleReadersClearedAtOpen }

    // MARK: - Named databases

    func database(named name: String, create: Bool) throws -> DatabaseHandle? {
        try environment.database(named: name, create: create && !isReadOnly)
    }
}
