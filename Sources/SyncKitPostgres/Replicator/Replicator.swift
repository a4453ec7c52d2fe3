#if PostgreSQL
import Foundation
import KVStore
import Logging
import SyncKit
import SyncWire
#if canImport(Glibc)
import Glibc
#endif

/// Replicates a container's declared collections and suites through a PostgreSQL server, so that
/// containers on several machines converge.
///
/// ```swift
/// try Replication.enable(.collection("checklist"), in: container)      // once, from any process
/// let replicator = try Replicator(container: container, server: ServerURL("postgres://kv@127.0.0.1:5432/kv"),
///                                 targets: [.collection(checklist, conflicts: .merge(Checklist.union))])
/// let report = try await replicator.sync()     // push, then pull
/// try await replicator.run()                   // or stay live: LISTEN/NOTIFY and local commits wake it
/// ```
///
/// - **Push.** The replicator is a history consumer (``Replication/consumerName``): what was written
///   while offline waits in the history. Pending keys go in batches, one server transaction each, with
///   their hybrid logical clock, the server version they were based on, and this device's id plus the
///   history token (unique on the server: a batch sent twice is applied once).
/// - **Pull.** Other devices' changes after the cursor are applied in one write transaction that also
///   stores the cursor: exactly once, even across a kill -9. They are written through the typed
///   collection (indexes and derived collections follow), recorded in history with author
///   ``Replication/author`` (never sent back), and wake observers and widgets like any commit.
/// - **Conflicts** (a change based on another version than the server's, or another device's change to
///   a key with a pending local write) are settled by the target's ``ConflictPolicy`` and reported as
///   ``SyncEvent/conflict(_:)``.
/// - **Expiry.** When the server has pruned past the cursor, the targets are reloaded from the server's
///   current state (``SyncEvent/resynchronized(cursor:)``); pending local writes are kept and sent.
///
/// One replicator per container at a time: it owns the container's sync (``SyncKit/SyncService``), and
/// a second one fails to start (``ReplicationError/ownedElsewhere(_:container:)``) or, made with
/// ``whenOwning(container:endpoint:targets:options:standby:events:)``, waits to take over. Each round
/// records how far the server has this container's history, for requests from any process.
public final class Replicator: Sendable {
    public struct Options: Sendable {
        /// Changes per server transaction (a push batch, a page pulled).
        public var batchSize = 5_000
        /// A push batch ends before this many bytes of keys and values (one change at least): with
        /// the few batches a push holds at once, it bounds the memory a round of large values takes.
        public var maxBatchBytes = 8 << 20
        /// A value longer than this on the server is refused as malformed, unread.
        public var maxValueBytes = 16 << 20
        /// History transactions read per push round.
        public var transactionsPerRound = 20_000
        /// Retries after a failure wait from `minimumBackoff`, doubling up to `maximumBackoff`.
        public var minimumBackoff: Duration = .milliseconds(100)
        public var maximumBackoff: Duration = .seconds(5)
        /// A statement (or transaction) with no answer for this long is abandoned and its connection
        /// closed: a server that died, or a network that drops packets silently, cannot hold a round
        /// for good. The next round connects anew, and sends again what had no answer (the server
        /// keeps one change per device and token).
        public var statementTimeout: Duration = .seconds(120)
        /// How long connecting (TCP, then PostgreSQL's start-up exchange) may take.
        public var connectTimeout: Duration = .seconds(10)
        /// In ``run(until:)``, a sync happens at least this often even if nothing woke it.
        public var pollInterval: Duration = .seconds(5)
        /// How far ahead of the other side's clock a hybrid logical clock stamp may be (60 s by
        /// default). A push stamped further ahead of the server's clock is refused
        /// (``ReplicationError/clockAhead(by:limit:)``); a pulled change stamped further ahead of this
        /// device's ``clock`` is quarantined and its stamp never adopted; and no remote stamp moves
        /// this device's clock past `clock() + maxClockSkew`.
        public var maxClockSkew: Duration = History.defaultMaxClockSkew
        /// This device's wall clock, against which pulled stamps are checked. A seam for tests that
        /// give a device a wrong clock; leave it to `Date()` otherwise.
        public var clock: @Sendable () -> Date = { Date() }
        /// The quarantine keeps at most this many changes and this many bytes of values; past either,
        /// the oldest are dropped (counted in the replica's state), so that a hostile device cannot
        /// make this one store without bound.
        public var maxQuarantinedChanges = 1_000
        public var maxQuarantineBytes = 64 << 20
        /// This device's writes that the server refused are kept (``RejectedWrite``) up to this many
        /// and this many bytes; past either, the oldest are dropped (counted in the replica's state).
        public var maxRejectedWrites = 1_000
        public var maxRejectedBytes = 64 << 20
        public var logger = Logger(label: "kvstore.sync", factory: { _ in SwiftLogNoOpLogHandler() })
        public init() {}
    }

    public let container: SharedContainer
    public let history: History
    /// What this replicator syncs with: the database, or a gateway with a credential (`nil` for a
    /// replicator that only retries quarantined changes).
    public let endpoint: Endpoint?
    /// The server, on the direct path (`nil` through a gateway, or without an endpoint).
    public var server: ServerURL? {
        if case .database(let url) = endpoint { url } else { nil }
    }
    /// The sync gateway, for a device that syncs with a credential (`nil` on the direct path).
    public var gateway: SyncGatewayURL? {
        if case .gateway(let url, _) = endpoint { url } else { nil }
    }
    public let options: Options
    /// The group's id on the server: the container's group identifier.
    public let group: String
    /// This container's device id: made for it, or, through a sync gateway, its credential's device
    /// and this container's install (the gateway records every push under them, whatever a request
    /// says: `NAME#` and the install's public id).
    public var device: String { deviceID.withLock { $0 } }
    private let deviceID: Locked<String>
    /// This container's install id (`InstallID`), a secret sent to a gateway with the credential.
    let install: String

    let targets: [Mutation.Target: ReplicatedTarget]
    let versions: [Mutation.Target: KVCollection<ByteKey, KeyVersion>]
    let collections: Replication.Collections
    let consumer: HistoryConsumer
    let events: @Sendable (SyncEvent) -> Void
    /// This process's ownership of the container's sync, for as long as the replicator lives.
    let ownership: SyncOwnership
    private let connection = Locked<(any ReplicationServer)?>(nil)
    private let succeeded = Locked(0)
    /// One round at a time (``round(_:)``).
    let rounds = RoundGate()
    /// Connections this replicator opened (for the rounds, not ``run(until:)``'s listener).
    let connectionsOpened = Locked(0)
    /// The replicator's lane of the process's ``KVStore/BlockingPool`` for its write transactions in
    /// async code, one at a time: waiting for the writer lock, which another process may hold, never
    /// holds a thread of Swift's cooperative pool.
    let writer = BlockingPool.Lane()
    /// A test's seam: awaited in every round, once it has its connection.
    let roundEntered = Locked<(@Sendable () async -> Void)?>(nil)
    /// When the server last answered an operation of this replicator's (`nil`: never yet).
    let serverAnswered = Locked<ContinuousClock.Instant?>(nil)
    /// A test's seam: awaited after each page of a resync is applied, with the number of pages so far.
    let resyncPaged = Locked<(@Sendable (Int) async -> Void)?>(nil)
    /// Whether the next round settles the container's files (``settleFiles(_:)``): the manifest changed
    /// by another device's hand, or an eager file was left missing. True at first: a process's first
    /// round looks at what an earlier one left.
    let filesToSettle = Locked(true)

    /// The rounds (``sync()``, ``push()``, ``pull()``, and those of ``run(until:)``) that reached the
    /// server and ended well since this replicator was made: 0 after a live run that never reached it.
    public var successfulRounds: Int { succeeded.withLock { $0 } }

    /// When the server (the database, or a gateway) last answered one of this replicator's requests,
    /// `nil` before the first: a round that goes on long is making progress while this moves (a resync
    /// of a large group), and is stuck when it does not (a connection that hangs). A gateway's refusal
    /// is an answer too (it ends its round at once, with its reason): a gateway that answers 503
    /// while its database is down is not a silent one.
    public var lastServerAnswer: ContinuousClock.Instant? { serverAnswered.withLock { $0 } }

    /// - Parameters:
    ///   - endpoint: the database, or a gateway with a credential; `nil` for a replicator that can
    ///     only ``retryQuarantined()`` (after an app upgrade, say, from a process that has no server to
    ///     hand), whose ``sync()`` throws ``ReplicationError/noServer``.
    ///   - targets: the typed collections and suites to replicate; each must be declared
    ///     (``Replication/enable(_:in:now:)``). Declared targets not listed here are left alone.
    ///   - events: called for every conflict resolved, resync and failure, on the replicator's task.
    /// - Throws: ``ReplicationError/notDeclared(_:)``; ``ReplicationError/server(_:)`` if another
    ///   replicator holds the container; ``ReplicationError/invalidCredential(_:)`` if a gateway's
    ///   token is not a token's form. The gateway's refusals come from ``sync()``:
    ///   ``ReplicationError/credentialRefused(_:)``, ``ReplicationError/rateLimited(retryAfter:budget:)``.
    public init(container: SharedContainer, endpoint: Endpoint?, targets: [ReplicatedTarget], options: Options = Options(),
                events: @escaping @Sendable (SyncEvent) -> Void = { _ in }) throws {
        if case .gateway(_, let token) = endpoint, !SyncTokens.isPresentable(token) {
            throw ReplicationError.invalidCredential("the token is not one `kvtool sync token issue` prints (\(SyncTokens.prefix) and 43 characters), nor a JWT")
        }
        self.endpoint = endpoint
        self.container = container
        self.options = options
        self.events = events
        group = container.groupIdentifier.rawValue
        history = try History.attach(to: container)
        collections = try Replication.Collections(store: container.store)
        let declared = Set(try Replication.declaredTargets(in: container.store))
        var byTarget: [Mutation.Target: ReplicatedTarget] = [:]
        var versions: [Mutation.Target: KVCollection<ByteKey, KeyVersion>] = [:]
        for target in targets {
            guard declared.contains(target.target) else { throw ReplicationError.notDeclared(target.target) }
            byTarget[target.target] = target
            versions[target.target] = try collections.versions(for: target.target)
        }
        // SyncKit's replicated catalog (``Replication/catalogCollection``) syncs whenever it is declared.
        if declared.contains(Replication.catalogTarget) && byTarget[Replication.catalogTarget] == nil {
            byTarget[Replication.catalogTarget] = try .untypedCollection(named: Replication.catalogCollection, in: container.store)
            versions[Replication.catalogTarget] = try collections.versions(for: Replication.catalogTarget)
        }
        // So does the manifest of the container's files (issue 49), once a prefix of them is declared;
        // Always with its own checks, whatever target a caller gave for it.
        if declared.contains(FileManifest.manifestTarget) {
            byTarget[FileManifest.manifestTarget] = try Self.manifestTarget(in: container.store)
            versions[FileManifest.manifestTarget] = try collections.versions(for: FileManifest.manifestTarget)
        }
        self.targets = byTarget
        self.versions = versions
        consumer = try history.consumer(named: Replication.consumerName)
        switch try SyncOwnership.acquire(container, mode: .once) {
        case .success(let ownership): self.ownership = ownership
        case .failure(let held): throw ReplicationError.ownedElsewhere(held.owner, container: container.path)
        }
        let collections = self.collections
        let home = Self.home(of: container)
        let (device, install) = try container.store.write { tx -> (String, String) in
            var state = try collections.replicaState(in: tx)
            if state.home == home, let install = state.install { return (state.device, install) }
            // First start here (or state from before homes were kept: that container keeps its id),
            // or a copy: a new id and install. What the copy knows of the server (cursor, versions)
            // stays true. State from before installs had ids gets one: through a gateway, the
            // container's next pushes go under its install (its tokens go on from its own).
            if state.home != nil && state.home != home {
                state.device = UUID().uuidString.lowercased()
                state.install = nil
            }
            state.home = home
            if state.install == nil { state.install = InstallID.make() }
            try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
            return (state.device, state.install!)
        }
        deviceID = Locked(device)
        self.install = install
    }

    /// `/etc/machine-id` and the store file's device and inode.
    static func home(of container: SharedContainer) -> String {
        let machine = (try? String(contentsOfFile: "/etc/machine-id", encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines) ?? "unknown"
        var info = stat()
        guard lstat(container.layout.storeDataFile, &info) == 0 else { return machine }
        return "\(machine):\(info.st_dev):\(info.st_ino)"
    }

    deinit {
        // Released without ``close()``: the close cannot be awaited here, so it is owned
        // (``OwnedCloses``), and awaited by whoever waits for them all.
        if let connection = connection.withLock({ $0 }) {
            OwnedCloses.start { await connection.close() }
        }
        ownership.release()
    }

    /// The process that owns the container's sync: this one, while the replicator lives.
    public var owner: SyncOwner { ownership.owner }

    // MARK: - One round

    /// Pushes what is pending, then pulls what other devices pushed (and pushes again if a merge made
    /// something new). On failure the error is recorded in the store (`kvtool sync status`) and thrown;
    /// nothing is lost, and the next call starts over. A push refused because this device's clock is
    /// too far ahead (``ReplicationError/clockAhead(by:limit:)``), or past a gateway's budget
    /// (``ReplicationError/pushRefused(reason:limit:detail:)``), still pulls before it throws.
    @discardableResult
    public func sync() async throws -> SyncReport {
        try await round { server, report in
            // A device whose clock is too far ahead still receives: its own changes wait, the
            // others' arrive (found by the randomized model: a refused push used to skip the pull).
            var refused: ReplicationError?
            var files = RoundFiles()
            do {
                // A read-only credential pulls only: local writes stay pending in the history.
                if !server.readOnly { report.pushed = try await push(server, report: &report, files: &files) }
            } catch let error as ReplicationError {
                // So does a device whose push a gateway refused for a budget.
                switch error {
                case .clockAhead, .pushRefused: refused = error
                default: throw error
                }
            }
            // Added to what a resync inside the pull counted (it adds its own), not put over it.
            report.pulled += try await pull(server, report: &report)
            // Before the round posts its status: a process it wakes finds the eager files here, and
            // the files it asked for.
            try await settleFiles(server)
            try await fetchWantedFiles(server)
            if let refused { throw refused }
            if try !server.readOnly && hasDirtyKeys() { report.pushed += try await push(server, report: &report, files: &files) }
        }
    }

    /// Only pushes what is pending (CKSyncEngine's `sendChanges`): for a process that must not spend
    /// time applying other devices' changes, such as an extension. Conflicts found are settled as in
    /// ``sync()``.
    @discardableResult
    public func push() async throws -> SyncReport {
        try await round { server, report in
            guard !server.readOnly else { throw ReplicationError.credentialRefused("it is read-only: it pulls and never pushes") }
            var files = RoundFiles()
            report.pushed = try await push(server, report: &report, files: &files)
        }
    }

    /// Only pulls and applies other devices' changes (CKSyncEngine's `fetchChanges`).
    @discardableResult
    public func pull() async throws -> SyncReport {
        try await round { server, report in
            report.pulled += try await pull(server, report: &report)
            try await settleFiles(server)
            try await fetchWantedFiles(server)
        }
    }

    /// One round: one at a time (``RoundGate``), so that two ``sync()`` calls at once never open two
    /// connections nor interleave their pushes and pulls; the second waits for the first, suspended.
    func round(_ body: (any ReplicationServer, inout SyncReport) async throws -> Void) async throws -> SyncReport {
        try await rounds.run {
            do {
                let server = try await connected()
                if let entered = roundEntered.withLock({ $0 }) { await entered() }
                var report = SyncReport()
                try await body(server, &report)
                (report.cursor, report.held) = try await onWriter { try recordSuccess() }
                succeeded.withLock { $0 += 1 }
                return report
            } catch {
                await dropConnection()
                let message = (error as? ReplicationError)?.description ?? "\(error)"
                try? await onWriter { try recordFailure(error) }
                events(.failed(message))
                throw error
            }
        }
    }

    /// Runs `body`, which writes to the store, on the replicator's lane of the pool (``writer``) and
    /// resumes the calling task with its result: a write waiting for another process's writer lock
    /// holds that thread, never one of the cooperative pool's. The caller is suspended until `body`
    /// returns, so what `body` captures is not touched meanwhile by anything else.
    func onWriter<R>(_ body: () throws -> R) async throws -> R {
        try await withoutActuallyEscaping(body) { body in
            let work = WriterWork(body)
            return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<UncheckedSendable<R>, any Error>) in
                writer.submit { continuation.resume(with: work.run()) }
            }.value
        }
    }

    /// Prunes the server's log and tombstones of this group older than `age`, so that devices whose
    /// cursor is older must resync. Returns the group's horizon after it
    /// (``ServerPruning/prunedThrough``: an earlier prune's when nothing was old enough, 0 when the
    /// log was never pruned); ``pruneServerReport(olderThan:)`` also says what it removed.
    @discardableResult
    public func pruneServer(olderThan age: Duration) async throws -> Int64 {
        try await pruneServerReport(olderThan: age).prunedThrough
    }

    /// ``pruneServer(olderThan:)``, saying how many changes and tombstones it removed.
    public func pruneServerReport(olderThan age: Duration) async throws -> ServerPruning {
        try await rounds.run { try await connected().prune(group: group, olderThan: age) }
    }

    /// Closes the connection to the server.
    public func close() async {
        await dropConnection()
    }

    func connected() async throws -> any ReplicationServer {
        if let existing = connection.withLock({ $0 }) {
            if !existing.isClosed { return existing }
            await dropConnection()   // the server closed it (a restart, say): connect anew
        }
        let fresh: any ReplicationServer
        switch endpoint {
        case .gateway(let gateway, let token):
            fresh = try GatewayConnection(url: gateway, token: token, group: group, maxValueBytes: options.maxValueBytes,
                                          operationTimeout: options.statementTimeout, connectTimeout: options.connectTimeout,
                                          install: install, answered: serverAnswered)
        case .database(let server):
            let direct = try await ServerConnection.connect(server, logger: options.logger, maxValueBytes: options.maxValueBytes,
                                                            operationTimeout: options.statementTimeout, connectTimeout: options.connectTimeout,
                                                            answered: serverAnswered)
            do {
                try await direct.migrate()
            } catch {
                await direct.close()
                throw error
            }
            fresh = direct
        case nil:
            throw ReplicationError.noServer
        }
        connectionsOpened.withLock { $0 += 1 }
        do {
            let id = try await fresh.serverID()
            try await onWriter { try adopt(server: id, device: fresh.assignedDevice) }
        } catch {
            await fresh.close()
            throw error
        }
        connection.withLock { $0 = fresh }
        return fresh
    }

    func dropConnection() async {
        if let old = connection.withLock({ current -> (any ReplicationServer)? in defer { current = nil }; return current }) {
            await old.close()
        }
    }

    // MARK: - Another server

    /// Records the server's id; if this device synced with another one, starts over with this one.
    /// Takes `device` as this container's device id when the server assigns one (a gateway, from the
    /// credential).
    func adopt(server id: String, device assigned: String? = nil) throws {
        let changed: Bool = try container.store.write(author: Replication.author) { tx in
            var state = try collections.replicaState(in: tx)
            if let assigned, assigned != state.device {
                state.device = assigned
                try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
            }
            guard state.server != id else { return false }
            // No id yet: the first sync, or state from before servers had ids (taken as this server).
            let known = state.server != nil
            state.server = id
            if known { try rebase(&state, in: tx) }
            try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
            return known
        }
        if let assigned { deviceID.withLock { $0 = assigned } }
        if changed { events(.serverChanged(server: id)) }
    }

    /// Forgets what this device knew of the server (its cursor, the versions of its keys) and queues
    /// every key of every target to be sent again, with the clock of the version it last knew (so a
    /// value is no newer than it was), or now for a key it never had a version of, or whose known
    /// clock is too far ahead of this device's to be sent.
    func rebase(_ state: inout ReplicaState, in tx: WriteTransaction) throws {
        let now = HybridTimestamp.next(after: .zero, now: Date()).rawValue
        var queued: [QueuedKey] = []
        for (target, replicated) in targets {
            guard let versions = versions[target] else { continue }
            var clocks: [[UInt8]: UInt64] = [:]
            try versions.forEach(in: tx) { key, version in
                clocks[key.bytes] = version.clock
                return true
            }
            try tx.unrecorded { try versions.removeAll(in: tx) }
            for key in try replicated.keys(tx) {
                // A known clock too far ahead of this device's (a row planted under this device's
                // own id, which it takes as its own change; or this machine's clock set back since)
                // would have every push of the key refused for good: it goes as a write of now
                // (found by the server-state fuzzer, issue 46).
                let known = clocks[key].flatMap { clockProblem($0) == nil ? $0 : nil }
                queued.append(QueuedKey(target: target, key: key, clock: known ?? now, requeued: true))
            }
        }
        try queueToSendAgain(queued, state: &state, in: tx)
        // What was quarantined stays quarantined (until applied, superseded or dropped for room), as
        // the previous server's: its numbers mean nothing to the new one, and no key waits on it.
        try keepQuarantineOfPreviousServer(in: tx)
        state.cursor = 0
        state.cursorMark = nil
        state.resyncs += 1
    }

    /// The server has fewer changes than this device saw (restored from an older backup, or
    /// recreated under the same id): starts over as with another server.
    func rebaseOnForgetfulServer() throws {
        let id: String? = try container.store.write(author: Replication.author) { tx in
            var state = try collections.replicaState(in: tx)
            try rebase(&state, in: tx)
            try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
            return state.server
        }
        events(.serverChanged(server: id ?? "unknown"))
    }

    // MARK: - Bookkeeping

    /// Records the round in the replica's state and in the container's sync status (how far the server
    /// has this container's history: what requests wait for), in one transaction.
    func recordSuccess() throws -> (Int64, HeldKeys?) {
        let now = Date()
        let recorded = try container.store.write { tx in
            var state = try collections.replicaState(in: tx)
            state.lastSyncAt = now
            state.lastError = nil
            try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
            // Keys held behind a quarantined change wait alone, named in the record (issue 47: they
            // failed every round, and every request was refused).
            let (waiting, held) = try dirtyKeys(in: tx)
            let record = try heldKeysRecord(in: tx)
            try tx.unrecorded {
                try ownership.recordSuccess(consumerToken: try consumer.token(in: tx), complete: waiting == held, held: record,
                                            now: now, in: tx)
            }
            return (state.cursor, record)
        }
        ownership.posted()
        return recorded
    }

    func recordFailure(_ error: any Error) throws {
        let message = (error as? ReplicationError)?.description ?? "\(error)"
        let now = Date()
        try container.store.write { tx in
            var state = try collections.replicaState(in: tx)
            state.lastError = message
            state.lastErrorAt = now
            try tx.unrecorded {
                try collections.state.put(state, forKey: Replication.stateKey, in: tx)
                try ownership.recordFailure(SyncFailure(reason: Self.reason(of: error), message: message, at: now), in: tx)
            }
        }
        ownership.posted()
    }

    /// How a request reports a round's error (``ReplicationError/classification``'s).
    static func reason(of error: any Error) -> SyncFailure.Reason {
        (error as? ReplicationError)?.classification.failureReason ?? .other
    }
}

/// A value that crosses back from the writer thread to the task that waits for it
/// (``Replicator/onWriter(_:)``). `@unchecked`: no lock; the continuation hands it over once, and the
/// writer thread keeps no copy (the waiting task is suspended until it arrives).
struct UncheckedSendable<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// The body ``Replicator/onWriter(_:)`` hands to the writer thread, run once there while its owner
/// waits. The thread lets go of it before the owner resumes: the body is a non-escaping closure, which
/// must not outlive the call it was given to. `@unchecked`: no lock; `body` is touched by one thread
/// only, the writer's, while its owner is suspended in ``Replicator/onWriter(_:)``.
final class WriterWork<R>: @unchecked Sendable {
    private var body: (() throws -> R)?

    init(_ body: @escaping () throws -> R) { self.body = body }

    func run() -> Result<UncheckedSendable<R>, any Error> {
        let body = self.body
        self.body = nil
        return Result { UncheckedSendable(try body!()) }
    }
}
#endif
