internal import CLMDB
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One open LMDB environment (a `data.mdb` + `lock.mdb` pair). Internal to KVStore: ``Store`` is the
/// public face.
///
/// There is at most one `Environment` per directory per process (LMDB forbids opening the same
/// environment twice in one process); ``open(directory:configuration:)`` keeps a process-wide registry.
/// It is opened with `MDB_NOTLS`, because Swift concurrency moves work between threads, so a read
/// transaction is not tied to the thread that began it.
///
/// It heals itself:
/// - `MDB_MAP_FULL` grows the map (doubling) and runs the write again from the start.
/// - `MDB_MAP_RESIZED` (another process grew the map) adopts the new size and retries.
/// - Stale reader slots left by crashed processes are cleared on a read-write open (`mdb_reader_check`).
/// - The map is never shrunk: before growing, the size recorded by any other process is adopted first.
///
/// `@unchecked Sendable`: `mapLock` (a pthread read-write lock) guards the map against a remap while
/// a transaction reads it; `staleReadersClearedAtOpen` and `metaPages` are set once, before anyone
/// else sees the environment; `isClosed` is written under the registry's lock, at the last lease's
/// end; `writeHitMapFull` is touched only by the one write transaction LMDB lets run at a time; the
/// rest is constants, ``Locked`` values or atomics.
final class Environment: @unchecked Sendable {
    struct Configuration: Sendable {
        var mapSize: Int
        var maxMapSize: Int
        var maxReaders: UInt32
        var maxDatabases: UInt32
        var durability: Durability
        var readOnly: Bool
        var fileMode: mode_t
        /// Opens one immutable file (a copy, ``Store/init(copyFile:)``) rather than a directory: `MDB_RDONLY|MDB_NOSUBDIR|
        /// MDB_NOLOCK`, so no lock file is needed or touched. Implies `readOnly`.
        var immutableFile = false
        /// Whether opening runs `mdb_reader_check`.
        var clearStaleReadersOnOpen = true
        /// How often, at most, a write transaction first runs `mdb_reader_check`; `nil`: only on open
        /// and when the map fills up.
        var staleReaderCheckInterval: Duration? = .seconds(1)
        /// Where the environment reports map growth, stale readers cleared and retried writes (see
        /// ``Store/Options/logger``). Not compared by ``conflict(with:)``: the first open's is used.
        var logger = Store.Options.silentLogger
    }

    let handle: OpaquePointer
    let directory: String
    let configuration: Configuration
    /// The lane async writes of this environment run on, on the process's ``BlockingPool`` (LMDB
    /// serialises them anyway, so however many wait, they hold one thread): made at the first async
    /// write (a process that never writes async, such as a widget, makes none), released with the
    /// environment.
    var writerLane: BlockingPool.Lane {
        writerLaneStorage.withLock { lane in
            if let lane { return lane }
            let made = BlockingPool.Lane()
            lane = made
            return made
        }
    }
    private let writerLaneStorage = Locked<BlockingPool.Lane?>(nil)
    /// How many stale reader slots opening the environment cleared. Set once, before anyone else
    /// sees the environment.
    private(set) var staleReadersClearedAtOpen = 0
    /// The meta pages, through which read transactions check the state they read (see ``MetaPages``);
    /// `nil` for a single-file copy, which nobody writes. Set once, before anyone else sees the
    /// environment.
    private(set) var metaPages: MetaPages?

    /// Readers hold it shared for the length of a transaction; changing the map size holds it
    /// exclusively, because `mdb_env_set_mapsize` needs no transaction active in this process.
    private let mapLock: UnsafeMutablePointer<pthread_rwlock_t>
    /// Handles of named databases already opened in this process.
    private let dbiCache = Locked<[String: DatabaseHandle]>([:])
    /// Serialises `mdb_dbi_open`, which must not run in two transactions of one process at once.
    /// (It guards no value: a `Bool` stands in, because ThreadSanitizer records the access to a
    /// zero-sized `Void` field at the address just past the object, inside whatever block comes next,
    /// and reported a race between two environments' locks there.)
    private let dbiOpenLock = Locked<Bool>(false)
    /// Reset read transactions kept for reuse (`mdb_txn_renew` is much cheaper than `mdb_txn_begin`):
    /// each slot holds one transaction's address, or 0. Taken and given back with one atomic
    /// exchange each, not a mutex, since every read passes here twice.
    private let readPool: InlineArray<4, Atomic<UInt>> = InlineArray { _ in Atomic<UInt>(0) }
    /// Whether ``closeEnvironment()`` ran: the environment is closed once, when its last ``EnvironmentLease``
    /// ends, under the registry's lock.
    private var isClosed = false
    /// Set by `put`/`delete` when LMDB reports `MDB_MAP_FULL`, even if the caller swallowed the error.
    /// Only the one active write transaction of this process touches it.
    var writeHitMapFull = false
    /// When (`CLOCK_MONOTONIC`, nanoseconds) this process last cleared stale reader slots.
    private let lastStaleReaderCheck = Atomic<UInt64>(0)

    /// `lock.mdb`, open for the environment's life (see ``EnvironmentFiles``); -1 for a single-file copy.
    private let lockFD: Int32
    /// The mode the environment commits in: the strongest any handle on it asked for (see
    /// ``commitAtLeast(_:)``). The lock also serialises `mdb_env_set_flags`, whose concurrent calls
    /// LMDB leaves undefined.
    private let durability: Locked<Durability>

    private init(handle: OpaquePointer, directory: String, configuration: Configuration, lockFD: Int32) {
        self.handle = handle
        self.lockFD = lockFD
        durability = Locked(configuration.durability)
        self.directory = directory
        self.configuration = configuration
        mapLock = .allocate(capacity: 1)
        pthread_rwlock_init(mapLock, nil)
    }

    deinit {
        closeEnvironment()
        pthread_rwlock_destroy(mapLock)
        mapLock.deallocate()
    }

    /// Aborts the pooled read transactions and closes LMDB's environment and `lock.mdb`. Runs once:
    /// when the last lease ends (with the registry locked, so that no other open of the same files can
    /// slip in between; closing any descriptor of `lock.mdb` drops this process's locks on it), or in
    /// `deinit` for an environment that never got a lease.
    private func closeEnvironment() {
        if isClosed { return }
        isClosed = true
        for txn in takePooledTransactions() { mdb_txn_abort(txn) }
        mdb_env_close(handle)
        if lockFD >= 0 { close(lockFD) }
    }

    // MARK: - Registry

    /// Open environments, by their files' identity, with how many leases (stores) use each. Held
    /// strongly and counted rather than through weak references: an object ever referenced weakly
    /// takes the runtime's slow path on every retain and release, a few hundred instructions a read.
    private static let registry = Locked<[String: RegisteredEnvironment]>([:])

    private struct RegisteredEnvironment {
        let environment: Environment
        var leases: Int
    }

    /// Ends one lease on the environment registered under `key`: the last one unregisters and closes it.
    fileprivate static func endLease(_ environment: Environment, key: String) {
        registry.withLock { registry in
            guard var entry = registry[key], entry.environment === environment else { return }
            entry.leases -= 1
            if entry.leases > 0 {
                registry[key] = entry
            } else {
                registry[key] = nil
                environment.closeEnvironment()
            }
        }
    }

    /// Environments are process-wide and live until exit, which runs no deinit: without this, every
    /// process that read would leave its pooled read transactions' slots in the reader table, for
    /// the next `mdb_reader_check` to find stale. At exit the idle pooled transactions are aborted,
    /// which frees their slots (a transaction still in use on another thread is left alone).
    private static let exitHandlerInstalled: Bool = {
        atexit { Environment.releasePooledReaders() }
        return true
    }()

    /// Never waits: a lock another thread holds at exit is skipped (its slots are left for
    /// `mdb_reader_check`, as before), so exiting cannot deadlock.
    private static func releasePooledReaders() {
        let environments = registry.withLockIfAvailable { $0.values.map(\.environment) } ?? []
        for environment in environments {
            for txn in environment.takePooledTransactions() { mdb_txn_abort(txn) }
        }
    }

    /// Opens the environment in `directory`, or returns the one this process already has open there.
    ///
    /// `directory` itself must not be a symbolic link (its parents may be), and its `data.mdb` and
    /// `lock.mdb` are opened as ``EnvironmentFiles`` describes: never through a link, checked with
    /// ``FilePolicy``. For an immutable file, `descriptor` may give the file already open (and checked
    /// by the caller, a published snapshot's checksum say): LMDB then maps exactly that file. It is borrowed.
    static func open(directory: String, descriptor: Int32? = nil, configuration: Configuration) throws -> EnvironmentLease {
        // The directory (or the immutable file) itself, never through a link: its device and inode
        // are the registry's key.
        let fd: Int32
        if configuration.immutableFile {
            fd = descriptor.map { dup($0) } ?? SystemCall.retry {
                Glibc.open(directory, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY)
            }
            guard fd >= 0 else {
                let code = errno
                if code == ELOOP { throw KVStoreError.unsafeFile(path: directory, reason: "it is a symbolic link, which is never followed") }
                throw KVStoreError.io(operation: "open store copy", path: directory, errno: code)
            }
        } else {
            fd = try SafePath.openRoot(directory, what: "store directory")
        }
        let identity: stat
        do { identity = try FilePolicy.status(fd, path: directory) } catch { close(fd); throw error }
        // Errors and `Store.directory` name the real path, not a `/proc/self/fd/N/Store` a container
        // passed.
        let display = EnvironmentFiles.realPath(of: fd)
            ?? realpath(directory, nil).map { real in defer { free(real) }; return String(cString: real) } ?? directory
        let key = EnvironmentFiles.key(identity)
        return try registry.withLock { registry in
            if var entry = registry[key] {
                let existing = entry.environment
                close(fd)
                if existing.configuration.readOnly && !configuration.readOnly {
                    throw KVStoreError.readOnly(path: existing.directory)
                }
                if let detail = existing.configuration.conflict(with: configuration) {
                    throw KVStoreError.conflictingOptions(path: existing.directory, detail: detail)
                }
                // The files are not opened again: closing a second descriptor of `lock.mdb` would drop
                // the locks LMDB holds on it in this process.
                entry.leases += 1
                registry[key] = entry
                return EnvironmentLease(existing, key: key)
            }
            var files: EnvironmentFiles
            do {
                files = configuration.immutableFile
                    ? try EnvironmentFiles.immutableFile(fd, status: identity, path: display)
                    : try EnvironmentFiles.openDirectory(fd, identity: identity, path: display, configuration: configuration)
            } catch {
                close(fd)
                throw error
            }
            defer {
                files.closeData()
                if !configuration.immutableFile { close(fd) }
            }
            do {
                let env = try openNew(files, directoryFD: configuration.immutableFile ? nil : fd,
                                      directory: display, configuration: configuration)
                registry[key] = RegisteredEnvironment(environment: env, leases: 1)
                _ = Self.exitHandlerInstalled
                return EnvironmentLease(env, key: key)
            } catch {
                files.closeAll()
                throw error
            }
        }
    }

    private static func openNew(
        _ files: EnvironmentFiles, directoryFD: Int32?, directory: String, configuration: Configuration
    ) throws -> Environment {
        var envPointer: OpaquePointer?
        try LMDBError.check(mdb_env_create(&envPointer))
        guard let handle = envPointer else { throw LMDBError.invalid }
        var metaPages: MetaPages?
        do {
            try LMDBError.check(mdb_env_set_maxreaders(handle, configuration.maxReaders))
            try LMDBError.check(mdb_env_set_maxdbs(handle, configuration.maxDatabases))
            try LMDBError.check(mdb_env_set_mapsize(handle, roundToPage(configuration.mapSize)))
            var flags = UInt32(MDB_NOTLS) | configuration.durability.environmentFlags
            if configuration.readOnly { flags |= UInt32(MDB_RDONLY) }
            if configuration.immutableFile { flags |= UInt32(MDB_RDONLY | MDB_NOSUBDIR | MDB_NOLOCK) }
            try files.openLMDB(handle, flags: flags, mode: configuration.fileMode, directoryFD: directoryFD)
            var stat = MDB_stat()
            try LMDBError.check(mdb_env_stat(handle, &stat))
            metaPages = MetaPages(descriptor: files.dataFD, pageSize: Int(stat.ms_psize))
            if !configuration.immutableFile {
                try adoptRecordedMapSize(handle, metaPages: metaPages, directory: directory, limit: configuration.maxMapSize)
            }
            try checkSize(handle, files, metaPages: metaPages, pageSize: Int(stat.ms_psize), directory: directory,
                          configuration: configuration)
        } catch {
            mdb_env_close(handle)
            throw error
        }
        let env = Environment(handle: handle, directory: directory, configuration: configuration, lockFD: files.lockFD)
        if !configuration.immutableFile { env.metaPages = metaPages }
        // A read-only open leaves stale slots to the writers, which clear them before writing (and
        // clears them itself only when the reader table is full): a widget's start-up does no scan.
        if configuration.clearStaleReadersOnOpen && !configuration.immutableFile && !configuration.readOnly {
            env.staleReadersClearedAtOpen = try env.clearStaleReaders()
            env.lastStaleReaderCheck.store(monotonicNanoseconds(), ordering: .relaxed)
            if env.staleReadersClearedAtOpen > 0 {
                env.log(.notice, "cleared stale reader slots at open", ["cleared": "\(env.staleReadersClearedAtOpen)"])
            }
        }
        if !configuration.immutableFile, env.mapSize > roundToPage(configuration.mapSize) {
            env.log(.info, "opened with the larger map size recorded in the store", ["mapSize": "\(env.mapSize)"])
        }
        return env
    }

    /// Right after opening: takes the map size recorded in the environment when it is larger than the
    /// configured one. LMDB opens with the configured size (or just the pages in use, if more), so a
    /// process configured for less than another process grew the map to would otherwise fill its
    /// smaller map on its first write and grow it to double the *recorded* size: every new process
    /// that writes a little would double the map, until it reached `maxMapSize`.
    ///
    /// The recorded size is adopted only up to `limit` (``Configuration/maxMapSize``): any process that
    /// can write the store can record any size, and mapping it is this process's cost.
    static func adoptRecordedMapSize(_ handle: OpaquePointer, metaPages: MetaPages?, directory: String, limit: Int) throws {
        var info = MDB_envinfo()
        try LMDBError.check(mdb_env_info(handle, &info))
        let configured = info.me_mapsize
        if let recorded = metaPages?.recordedMapSize, recorded > max(limit, configured) {
            throw KVStoreError.mapSizeOverLimit(path: directory, recorded: recorded, limit: limit)
        }
        // Size 0 adopts the size in the meta page (never less than the pages in use).
        try LMDBError.check(mdb_env_set_mapsize(handle, 0))
        try LMDBError.check(mdb_env_info(handle, &info))
        if info.me_mapsize > max(limit, configured) {
            // No meta pages to read it from beforehand: undo, then refuse.
            _ = mdb_env_set_mapsize(handle, configured)
            throw KVStoreError.mapSizeOverLimit(path: directory, recorded: info.me_mapsize, limit: limit)
        }
        if info.me_mapsize < configured {
            try LMDBError.check(mdb_env_set_mapsize(handle, configured))
        }
    }

    private static func roundToPage(_ size: Int) -> Int {
        let page = max(Int(sysconf(Int32(_SC_PAGESIZE))), 4096)
        return max(page * 16, (size + page - 1) / page * page)
    }

    // MARK: - Read transactions

    /// Runs `body` inside a read-only transaction. The pointer is valid only inside `body`.
    func withReadTransaction<R>(_ body: (OpaquePointer) throws -> R) throws -> R {
        let txn = try beginRead()
        defer { endRead(txn) }
        return try body(txn)
    }

    /// Begins a read-only transaction that the caller must end with ``endRead(_:)`` on this thread,
    /// on every path: ``withReadTransaction(_:)`` in two calls, for ``Store/read(_:)``'s one loop.
    @inline(__always)
    func beginRead() throws -> OpaquePointer {
        let txn = try beginExactReadTransaction()
        ThreadState.adjustReadDepth(by: 1)
        return txn
    }

    /// Ends a transaction ``beginRead()`` began.
    @inline(__always)
    func endRead(_ txn: OpaquePointer) {
        ThreadState.adjustReadDepth(by: -1)
        releaseReadTransaction(txn)
        pthread_rwlock_unlock(mapLock)
    }

    /// Begins a transaction with `begin` while holding `mapLock` shared, and returns it with the lock
    /// still held: the caller ends the transaction, then unlocks. When another process grew the map
    /// (`MDB_MAP_RESIZED`), adopts the new size and begins again.
    private func beginLocked(_ begin: (inout OpaquePointer?) -> Int32) throws -> OpaquePointer {
        var retriedFullReaderTable = false
        while true {
            pthread_rwlock_rdlock(mapLock)
            var txn: OpaquePointer?
            let rc = begin(&txn)
            if rc == MDB_MAP_RESIZED {
                pthread_rwlock_unlock(mapLock)
                try adoptMapSize()
                continue
            }
            if rc == MDB_READERS_FULL && !retriedFullReaderTable {
                // Every slot is taken: give back this process's idle pooled slots, clear the slots of
                // processes that died, and try once more. Otherwise the typed error stands, and a
                // later call tries again the same way: the process recovers once slots are free.
                pthread_rwlock_unlock(mapLock)
                retriedFullReaderTable = true
                let released = takePooledTransactions()
                for pooled in released { mdb_txn_abort(pooled) }
                if try clearStaleReaders() > 0 || !released.isEmpty { continue }
                throw LMDBError.readersFull
            }
            guard rc == MDB_SUCCESS, let txn else {
                pthread_rwlock_unlock(mapLock)
                throw LMDBError(rawValue: rc)
            }
            return txn
        }
    }

    /// Begins a read transaction, as ``beginLocked(_:)`` does, whose view is certainly the
    /// transaction LMDB reports: where the meta pages say it may not be (a reader held up while a
    /// writer committed twice; see ``MetaPages``), it begins again.
    private func beginExactReadTransaction() throws -> OpaquePointer {
        var previous: UInt64?
        while true {
            let txn = try beginLocked(acquireReadTransaction)
            guard let metaPages else { return txn }
            let id = UInt64(mdb_txn_id(txn))
            if metaPages.isExact(transaction: id, repeated: previous == id) { return txn }
            previous = id
            releaseReadTransaction(txn)
            pthread_rwlock_unlock(mapLock)
        }
    }

    private func acquireReadTransaction(_ txn: inout OpaquePointer?) -> Int32 {
        if let pooled = takePooledTransaction() {
            let rc = mdb_txn_renew(pooled)
            if rc == MDB_SUCCESS { txn = pooled; return rc }
            mdb_txn_abort(pooled)
            if rc == MDB_MAP_RESIZED { return rc }
        }
        return mdb_txn_begin(handle, nil, UInt32(MDB_RDONLY), &txn)
    }

    private func releaseReadTransaction(_ txn: OpaquePointer) {
        mdb_txn_reset(txn)
        if !pool(txn) { mdb_txn_abort(txn) }
    }

    /// A pooled transaction, if one is waiting.
    private func takePooledTransaction() -> OpaquePointer? {
        for i in readPool.indices where readPool[i].load(ordering: .relaxed) != 0 {
            let bits = readPool[i].exchange(0, ordering: .acquiring)
            if bits != 0 { return OpaquePointer(bitPattern: bits) }
        }
        return nil
    }

    /// Every pooled transaction, taken out of the pool.
    private func takePooledTransactions() -> [OpaquePointer] {
        var taken: [OpaquePointer] = []
        while let txn = takePooledTransaction() { taken.append(txn) }
        return taken
    }

    /// Puts a reset transaction in a free slot; false when the pool is full.
    private func pool(_ txn: OpaquePointer) -> Bool {
        let bits = UInt(bitPattern: txn)
        for i in readPool.indices where readPool[i].load(ordering: .relaxed) == 0 {
            if readPool[i].compareExchange(expected: 0, desired: bits, ordering: .releasing).exchanged { return true }
        }
        return false
    }

    // MARK: - Write transactions

    /// Runs `body` inside a write transaction and commits it if `body` returns; aborts it if `body` throws.
    ///
    /// If LMDB reports `MDB_MAP_FULL` (during `body` or at commit), the transaction is aborted, the map
    /// grows, and `body` runs again from the start; so `body` must keep its side effects inside the
    /// transaction. It returns once the commit succeeded; what must happen after a commit (write
    /// observers' `transactionDidCommit`) is ``Store/write(author:_:)``'s business, once this returns.
    func withWriteTransaction<R>(
        _ body: (OpaquePointer) throws -> R
    ) throws -> R {
        if configuration.readOnly { throw KVStoreError.readOnly(path: directory) }
        if ThreadState.writeDepth > 0 { throw KVStoreError.nestedWrite }
        try clearStaleReadersIfDue()
        while true {
            let txn = try beginLocked { mdb_txn_begin(handle, nil, 0, &$0) }
            writeHitMapFull = false
            ThreadState.writeDepth += 1
            var committed = false
            do {
                let result = try body(txn)
                if writeHitMapFull { throw LMDBError.mapFull }
                committed = true
                try LMDBError.check(mdb_txn_commit(txn))
                ThreadState.writeDepth -= 1
                pthread_rwlock_unlock(mapLock)
                return result
            } catch {
                if !committed { mdb_txn_abort(txn) }
                ThreadState.writeDepth -= 1
                pthread_rwlock_unlock(mapLock)
                let mapFull = writeHitMapFull || (error as? LMDBError) == .mapFull
                writeHitMapFull = false
                guard mapFull else { throw error }
                // A reader that died holding a transaction keeps every page freed since from being
                // reused: clear such slots and try again before growing the map.
                let cleared = try clearStaleReaders()
                if cleared > 0 {
                    log(.notice, "the map filled up: cleared stale reader slots, running the write again", ["cleared": "\(cleared)"])
                    continue
                }
                try growMap()
                log(.info, "running the write again after the map grew", [:])
            }
        }
    }

    // MARK: - Map size

    /// Adopts a map size that another process recorded (`MDB_MAP_RESIZED`).
    private func adoptMapSize() throws {
        try withExclusiveMap {
            try refuseRecordedMapSizeOverLimit(current: mapSize)
            try LMDBError.check(mdb_env_set_mapsize(handle, 0))
        }
        log(.info, "adopted the map size another process grew to", ["mapSize": "\(mapSize)"])
    }

    /// Throws ``KVStoreError/mapSizeOverLimit(path:recorded:limit:)`` when the size another process
    /// recorded is larger than both ``Configuration/maxMapSize`` and `current`: adopting it
    /// (`mdb_env_set_mapsize(env, 0)`) would map whatever size any process wrote into the meta page.
    private func refuseRecordedMapSizeOverLimit(current: Int) throws {
        guard let recorded = metaPages?.recordedMapSize, recorded > max(configuration.maxMapSize, current) else { return }
        throw KVStoreError.mapSizeOverLimit(path: directory, recorded: recorded, limit: configuration.maxMapSize)
    }

    /// Makes room: takes the larger size another process recorded if there is one, and otherwise
    /// doubles the map (by 1 GiB past 1 GiB). It never shrinks.
    private func growMap() throws {
        guard ThreadState.readDepth == 0 else {
            // This thread holds a read transaction, so the map cannot be remapped under it.
            throw LMDBError.mapFull
        }
        try withExclusiveMap {
            // The meta page records the size of the last *committed* transaction. A transaction that
            // filled a map this process already grew has not committed it yet, so adopting the meta
            // size alone would shrink the map back and retry forever: grow from the larger of the two.
            let mine = mapSize
            try refuseRecordedMapSizeOverLimit(current: mine)
            try LMDBError.check(mdb_env_set_mapsize(handle, 0))
            // Another process recorded a larger map, which this one had not needed until now: take it
            // and try again, rather than doubling it.
            if mapSize > mine {
                log(.notice, "the map filled up: adopted the larger size another process recorded", ["from": "\(mine)", "to": "\(mapSize)"])
                return
            }
            let current = max(mine, mapSize)
            let grown = current >= 1 << 30 ? current + (1 << 30) : current * 2
            guard grown <= configuration.maxMapSize else {
                throw KVStoreError.mapLimitReached(limit: configuration.maxMapSize)
            }
            try LMDBError.check(mdb_env_set_mapsize(handle, grown))
            log(.notice, "the map filled up: grew it", ["from": "\(current)", "to": "\(grown)"])
        }
    }

    private func withExclusiveMap(_ body: () throws -> Void) throws {
        pthread_rwlock_wrlock(mapLock)
        defer { pthread_rwlock_unlock(mapLock) }
        for txn in takePooledTransactions() { mdb_txn_abort(txn) }
        try body()
    }

    /// The ID of the last transaction committed to the meta pages, by any process: two loads from
    /// memory. A commit updates it before any reader can begin on it. `nil` for a single-file copy
    /// (``MetaPages`` are not mapped there).
    var lastCommittedTransactionID: UInt64? {
        guard let metaPages else { return nil }
        return max(metaPages.transactionID(inPage: 0), metaPages.transactionID(inPage: 1))
    }

    /// The current map size in bytes, as this process sees it.
    var mapSize: Int { info().me_mapsize }

    func info() -> MDB_envinfo {
        var info = MDB_envinfo()
        // mdb_env_info cannot fail on an open environment; the code is still checked.
        if mdb_env_info(handle, &info) != MDB_SUCCESS { return MDB_envinfo() }
        return info
    }

    func stat() throws -> MDB_stat {
        var stat = MDB_stat()
        try LMDBError.check(mdb_env_stat(handle, &stat))
        return stat
    }

    /// Clears stale reader slots if ``Configuration/staleReaderCheckInterval`` has passed since the
    /// last time. A reader that died holding a transaction pins the transaction it read: until its slot is
    /// cleared, no page freed after that transaction can be reused, so the file grows with every commit.
    /// Writers are the ones who suffer from that, so they check, at most once per interval.
    private func clearStaleReadersIfDue() throws {
        guard let interval = configuration.staleReaderCheckInterval, !configuration.immutableFile else { return }
        let (seconds, attoseconds) = interval.components
        let nanoseconds = UInt64(max(0, seconds)) &* 1_000_000_000 &+ UInt64(max(0, attoseconds) / 1_000_000_000)
        let now = monotonicNanoseconds()
        let last = lastStaleReaderCheck.load(ordering: .relaxed)
        guard now &- last >= nanoseconds,
              lastStaleReaderCheck.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged
        else { return }
        let cleared = try clearStaleReaders()
        if cleared > 0 { log(.notice, "cleared stale reader slots before a write", ["cleared": "\(cleared)"]) }
    }

    /// Clears reader slots of processes that died. Returns how many were cleared.
    func clearStaleReaders() throws -> Int {
        var dead: Int32 = 0
        try LMDBError.check(mdb_reader_check(handle, &dead))
        return Int(dead)
    }

    /// Makes the environment commit at least as durably as `wanted` (`mdb_env_set_flags`; LMDB keeps
    /// its synchronous meta descriptor open in every mode, so the flags can change after opening). A
    /// weaker mode than the current one changes nothing.
    func commitAtLeast(_ wanted: Durability) throws {
        try durability.withLock { current in
            guard wanted.strength > current.strength else { return }
            let changeable = UInt32(MDB_NOSYNC | MDB_NOMETASYNC)
            // Clearing first passes through a stronger mode, never a weaker one.
            try LMDBError.check(mdb_env_set_flags(handle, changeable & ~wanted.environmentFlags, 0))
            if wanted.environmentFlags != 0 { try LMDBError.check(mdb_env_set_flags(handle, wanted.environmentFlags, 1)) }
            current = wanted
        }
    }

    /// Flushes buffers to disk; needed only in ``Durability/noSync`` mode.
    func sync(force: Bool) throws {
        try LMDBError.check(mdb_env_sync(handle, force ? 1 : 0))
    }

    // MARK: - Named databases

    /// The handle of the named database, opening (and with `create`, creating) it on first use.
    /// Returns `nil` if it does not exist and `create` is false.
    ///
    /// Must not be called while this thread is inside a transaction, unless the handle is already open:
    /// it throws ``KVStoreError/databaseOpenedInsideTransaction(_:)`` then.
    func database(named name: String, create: Bool) throws -> DatabaseHandle? {
        if let cached = dbiCache.withLock({ $0[name] }) { return cached }
        // A transaction can use only the databases that were open in the process when it began, so a
        // handle opened now would fail (EINVAL) in the transaction this thread is inside.
        if ThreadState.isInTransaction {
            throw KVStoreError.databaseOpenedInsideTransaction(name)
        }
        func open(creating: Bool) -> (OpaquePointer) throws -> DatabaseHandle? {
            { txn in
                var dbi = MDB_dbi()
                let rc = mdb_dbi_open(txn, name, creating ? UInt32(MDB_CREATE) : 0, &dbi)
                if rc == MDB_NOTFOUND { return nil }
                try LMDBError.check(rc)
                return DatabaseHandle(dbi: dbi)
            }
        }
        // An existing database is opened in a read transaction (a handle opened there becomes shared
        // only if that transaction commits), so that opening a store never waits for the write lock:
        // a writer stopped in the middle of a transaction blocks no process that opens the store to
        // read, even read-write. Only a missing database takes a write transaction.
        let existing = try dbiOpenLock.withLock { _ -> DatabaseHandle? in
            if let cached = dbiCache.withLock({ $0[name] }) { return cached }
            let dbi = try withFreshReadTransaction(open(creating: false))
            if let dbi { dbiCache.withLock { $0[name] = dbi } }
            return dbi
        }
        guard existing == nil, create, !configuration.readOnly else { return existing }
        // Lock order: LMDB's writer lock, then dbiOpenLock (as ``database(named:create:inWrite:)``);
        // dbiOpenLock is not held while waiting for the writer lock.
        let created = try withWriteTransaction { txn in
            try dbiOpenLock.withLock { _ -> DatabaseHandle? in try dbiCache.withLock({ $0[name] }) ?? open(creating: true)(txn) }
        }
        if let created { cacheDatabases([name: created]) }
        return created
    }

    /// Opens (or with `create`, creates) the named database inside the write transaction `txn`, for
    /// use in that transaction. The handle becomes usable by other transactions only once `txn`
    /// commits: pass it to ``cacheDatabases(_:)`` then. If `txn` aborts, LMDB closes it, and the
    /// database is not created.
    func database(named name: String, create: Bool, inWrite txn: OpaquePointer) throws -> DatabaseHandle? {
        if let cached = dbiCache.withLock({ $0[name] }) { return cached }
        return try dbiOpenLock.withLock { _ -> DatabaseHandle? in
            if let cached = dbiCache.withLock({ $0[name] }) { return cached }
            var dbi = MDB_dbi()
            let rc = mdb_dbi_open(txn, name, create ? UInt32(MDB_CREATE) : 0, &dbi)
            if rc == MDB_NOTFOUND { return nil }
            try LMDBError.check(rc)
            return DatabaseHandle(dbi: dbi)
        }
    }

    /// Makes handles opened in a write transaction that committed available to every transaction.
    func cacheDatabases(_ handles: [String: DatabaseHandle]) {
        guard !handles.isEmpty else { return }
        dbiCache.withLock { $0.merge(handles) { cached, _ in cached } }
    }

    /// The handle of the named database for use inside `transaction`: the cached handle if this process
    /// has it open, `nil` if the database does not exist in the transaction's snapshot.
    ///
    /// - Throws: ``KVStoreError/databaseOpenedInsideTransaction(_:)`` if the database exists but was not
    ///   open in this process when the transaction began (another process created it since): LMDB does
    ///   not let the transaction use a handle opened now. ``Store`` catches it, opens the database and
    ///   runs the transaction again.
    func database(named name: String, in transaction: OpaquePointer) throws -> DatabaseHandle? {
        if let cached = dbiCache.withLock({ $0[name] }) { return cached }
        // Named databases are records of the main database (`MAIN_DBI`), which every transaction can
        // read: its handle needs no opening (`mdb_dbi_open` with a NULL name).
        var main = MDB_dbi()
        try LMDBError.check(mdb_dbi_open(transaction, nil, 0, &main))
        let rc = Array(name.utf8).withUnsafeBytes { bytes in
            var key = MDB_val(mv_size: bytes.count, mv_data: UnsafeMutableRawPointer(mutating: bytes.baseAddress))
            var value = MDB_val()
            return mdb_get(transaction, main, &key, &value)
        }
        if rc == MDB_NOTFOUND { return nil }
        try LMDBError.check(rc)
        throw KVStoreError.databaseOpenedInsideTransaction(name)
    }

    /// Forgets a cached handle after its database was dropped.
    func forgetDatabase(named name: String) {
        _ = dbiCache.withLock { $0.removeValue(forKey: name) }
    }

    private func withFreshReadTransaction<R>(_ body: (OpaquePointer) throws -> R) throws -> R {
        let txn = try beginLocked { mdb_txn_begin(handle, nil, UInt32(MDB_RDONLY), &$0) }
        defer { pthread_rwlock_unlock(mapLock) }
        do {
            let result = try body(txn)
            try LMDBError.check(mdb_txn_commit(txn))
            return result
        } catch {
            mdb_txn_abort(txn)
            throw error
        }
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds.
func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) &* 1_000_000_000 &+ UInt64(now.tv_nsec)
}

/// One ``Store``'s hold on its environment: the environment stays registered (so that opening the
/// same files again in this process shares it) and open while any lease on it exists, and the last
/// lease to end closes it.
final class EnvironmentLease: Sendable {
    let environment: Environment
    private let key: String

    fileprivate init(_ environment: Environment, key: String) {
        self.environment = environment
        self.key = key
    }

    deinit { Environment.endLease(environment, key: key) }
}

/// How many read and write transactions the current thread holds, across all environments. Used to
/// refuse nested writes and to avoid remapping under a read transaction of the same thread.
enum ThreadState {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in pointer.map { free($0) } }
        return key
    }()

    private static var counters: UnsafeMutablePointer<(Int, Int)> {
        if let existing = pthread_getspecific(key) {
            return existing.assumingMemoryBound(to: (Int, Int).self)
        }
        let fresh = malloc(MemoryLayout<(Int, Int)>.size)!.bindMemory(to: (Int, Int).self, capacity: 1)
        fresh.initialize(to: (0, 0))
        pthread_setspecific(key, fresh)
        return fresh
    }

    static var readDepth: Int {
        get { counters.pointee.0 }
        set { counters.pointee.0 = newValue }
    }

    /// `readDepth += delta` with one thread-local look-up, not two.
    static func adjustReadDepth(by delta: Int) {
        counters.pointee.0 += delta
    }

    /// Whether the current thread is inside a read or write transaction of any environment.
    static var isInTransaction: Bool { readDepth > 0 || writeDepth > 0 }

    static var writeDepth: Int {
        get { counters.pointee.1 }
        set { counters.pointee.1 = newValue }
    }
}
