#if PostgreSQL
import Foundation
import KVStore
import Logging
import SyncKit
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
/// One replicator per container at a time: a second one fails to start (a lock in the container).
public final class Replicator: @unchecked Sendable {
    public struct Options: Sendable {
        /// Changes per server transaction.
        public var batchSize = 1_000
        /// A value longer than this on the server is refused as malformed, unread.
        public var maxValueBytes = 16 << 20
        /// History transactions read per push round.
        public var transactionsPerRound = 20_000
        /// Retries after a failure wait from `minimumBackoff`, doubling up to `maximumBackoff`.
        public var minimumBackoff: Duration = .milliseconds(100)
        public var maximumBackoff: Duration = .seconds(5)
        /// In ``run(until:)``, a sync happens at least this often even if nothing woke it.
        public var pollInterval: Duration = .seconds(5)
        public var logger = Logger(label: "kvstore.sync", factory: { _ in SwiftLogNoOpLogHandler() })
        public init() {}
    }

    public let container: SharedContainer
    public let history: History
    public let server: ServerURL
    public let options: Options
    /// The group's id on the server: the container's group identifier.
    public let group: String
    /// This container's device id.
    public let device: String

    let targets: [Mutation.Target: ReplicatedTarget]
    let versions: [Mutation.Target: KVCollection<ByteKey, KeyVersion>]
    let collections: Replication.Collections
    let consumer: HistoryConsumer
    let events: @Sendable (SyncEvent) -> Void
    private let lockDescriptor: Int32
    private let connection = Locked<ServerConnection?>(nil)

    /// - Parameters:
    ///   - targets: the typed collections and suites to replicate; each must be declared
    ///     (``Replication/enable(_:in:now:)``). Declared targets not listed here are left alone.
    ///   - events: called for every conflict resolved, resync and failure, on the replicator's task.
    /// - Throws: ``ReplicationError/notDeclared(_:)``; ``ReplicationError/server(_:)`` if another
    ///   replicator holds the container.
    public init(container: SharedContainer, server: ServerURL, targets: [ReplicatedTarget], options: Options = Options(),
                events: @escaping @Sendable (SyncEvent) -> Void = { _ in }) throws {
        self.container = container
        self.server = server
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
        self.targets = byTarget
        self.versions = versions
        consumer = try history.consumer(named: Replication.consumerName)
        let lockPath = container.path + "/.sync.lock"
        let fd = open(lockPath, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw KVStoreError.io(operation: "open", path: lockPath, errno: errno) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            Glibc.close(fd)
            throw ReplicationError.server("another replicator is running on \(container.path)")
        }
        lockDescriptor = fd
        let collections = self.collections
        let home = Self.home(of: container)
        device = try container.store.write { tx in
            var state = try collections.replicaState(in: tx)
            guard state.home != home else { return state.device }
            // First start here (or state from before homes were kept: that container keeps its id),
            // or a copy: a new id. What the copy knows of the server (cursor, versions) stays true.
            if state.home != nil { state.device = UUID().uuidString.lowercased() }
            state.home = home
            try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
            return state.device
        }
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
        if let connection = connection.withLock({ $0 }) {
            Task { await connection.close() }
        }
        Glibc.close(lockDescriptor)
    }

    // MARK: - One round

    /// Pushes what is pending, then pulls what other devices pushed (and pushes again if a merge made
    /// something new). On failure the error is recorded in the store (`kvtool sync status`) and thrown;
    /// nothing is lost, and the next call starts over.
    @discardableResult
    public func sync() async throws -> SyncReport {
        try await round { server, report in
            report.pushed = try await push(server, report: &report)
            report.pulled = try await pull(server, report: &report)
            if try hasDirtyKeys() { report.pushed += try await push(server, report: &report) }
        }
    }

    /// Only pushes what is pending (CKSyncEngine's `sendChanges`): for a process that must not spend
    /// time applying other devices' changes, such as an extension. Conflicts found are settled as in
    /// ``sync()``.
    @discardableResult
    public func push() async throws -> SyncReport {
        try await round { server, report in report.pushed = try await push(server, report: &report) }
    }

    /// Only pulls and applies other devices' changes (CKSyncEngine's `fetchChanges`).
    @discardableResult
    public func pull() async throws -> SyncReport {
        try await round { server, report in report.pulled = try await pull(server, report: &report) }
    }

    private func round(_ body: (ServerConnection, inout SyncReport) async throws -> Void) async throws -> SyncReport {
        do {
            let server = try await connected()
            var report = SyncReport()
            try await body(server, &report)
            report.cursor = try recordSuccess()
            return report
        } catch {
            await dropConnection()
            let message = (error as? ReplicationError)?.description ?? "\(error)"
            try? recordFailure(message)
            events(.failed(message))
            throw error
        }
    }

    /// Prunes the server's log and tombstones of this group older than `age`, so that devices whose
    /// cursor is older must resync. Returns the new horizon (0 if nothing was old enough).
    public func pruneServer(olderThan age: Duration) async throws -> Int64 {
        try await connected().prune(group: group, olderThan: age)
    }

    /// Closes the connection to the server.
    public func close() async {
        await dropConnection()
    }

    private func connected() async throws -> ServerConnection {
        if let existing = connection.withLock({ $0 }) {
            if !existing.isClosed { return existing }
            await dropConnection()   // the server closed it (a restart, say): connect anew
        }
        let fresh = try await ServerConnection.connect(server, logger: options.logger, maxValueBytes: options.maxValueBytes)
        do {
            try await fresh.migrate()
            try adopt(server: try await fresh.serverID())
        } catch {
            await fresh.close()
            throw error
        }
        connection.withLock { $0 = fresh }
        return fresh
    }

    private func dropConnection() async {
        if let old = connection.withLock({ current -> ServerConnection? in defer { current = nil }; return current }) {
            await old.close()
        }
    }

    // MARK: - Another server

    /// Records the server's id; if this device synced with another one, starts over with this one.
    private func adopt(server id: String) throws {
        let changed: Bool = try container.store.write(author: Replication.author) { tx in
            var state = try collections.replicaState(in: tx)
            guard state.server != id else { return false }
            // No id yet: the first sync, or state from before servers had ids (taken as this server).
            let known = state.server != nil
            state.server = id
            if known { try rebase(&state, in: tx) }
            try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
            return known
        }
        if changed { events(.serverChanged(server: id)) }
    }

    /// Forgets what this device knew of the server (its cursor, the versions of its keys) and queues
    /// every key of every target to be sent again, with the clock of the version it last knew (so a
    /// value is no newer than it was), or now for a key it never had a version of.
    private func rebase(_ state: inout ReplicaState, in tx: WriteTransaction) throws {
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
            for key in try replicated.keys(tx) { queued.append(QueuedKey(target: target, key: key, clock: clocks[key] ?? now)) }
        }
        try queueToSendAgain(queued, state: &state, in: tx)
        state.cursor = 0
        state.cursorMark = nil
        state.resyncs += 1
    }

    /// The server has fewer changes than this device saw (restored from an older backup, or
    /// recreated under the same id): starts over as with another server.
    private func rebaseOnForgetfulServer() throws {
        let id: String? = try container.store.write(author: Replication.author) { tx in
            var state = try collections.replicaState(in: tx)
            try rebase(&state, in: tx)
            try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
            return state.server
        }
        events(.serverChanged(server: id ?? "unknown"))
    }

    // MARK: - Push

    private struct PendingKey: Hashable {
        var target: Mutation.Target
        var key: [UInt8]
    }

    private struct PushItem {
        var change: OutgoingChange
        var target: Mutation.Target
        var dirtyIDs: [UInt64]
    }

    private func push(_ server: ServerConnection, report: inout SyncReport) async throws -> Int {
        var pushed = 0
        // Bounded: a key that keeps losing races to another device is left for the next round.
        for _ in 0..<10 {
            if case .expired = try consumer.pendingChanges(matching: HistoryFilter(transactionLimit: 1)) {
                try requeueEverything()
            }
            let (items, next) = try collectPending()
            if !items.isEmpty {
                for start in stride(from: 0, to: items.count, by: options.batchSize) {
                    let batch = Array(items[start..<min(start + options.batchSize, items.count)])
                    let outcomes = try await server.push(group: group, device: device, changes: batch.map(\.change))
                    try record(outcomes, of: batch, report: &report)
                    pushed += outcomes.count { if case .applied = $0 { true } else { false } }
                }
            }
            if let next { try consumer.acknowledge(through: next) }
            // Until nothing is left: a round reads at most `transactionsPerRound` history transactions.
            if try items.isEmpty && !hasDirtyKeys() { break }
        }
        return pushed
    }

    private func hasDirtyKeys() throws -> Bool {
        try collections.store.read { tx in try collections.dirty.first(in: tx) != nil }
    }

    /// What to send: the latest pending history entry of each replicated key (unless a later entry
    /// is a replicator's own: another device's value that won), plus the dirty keys; with each key's
    /// current value, read in the same transaction as the history.
    private func collectPending() throws -> ([PushItem], ChangeToken?) {
        let token = try consumer.token()
        let store = container.store
        return try store.read { tx in
            var latest: [PendingKey: HistoryEntry] = [:]
            var order: [PendingKey] = []
            var next: ChangeToken?
            let filter = HistoryFilter(targets: Set(targets.keys), transactionLimit: options.transactionsPerRound)
            switch try history.changes(since: token, matching: filter, in: tx) {
            case .expired:
                next = nil   // requeueEverything() just ran; a purge in between is caught next round
            case .changes(let transactions, let through):
                next = through
                for transaction in transactions {
                    for entry in transaction.entries {
                        let pending = PendingKey(target: entry.target, key: entry.key)
                        if latest.updateValue(entry, forKey: pending) == nil { order.append(pending) }
                    }
                }
            }
            var items: [PushItem] = []
            var index: [PendingKey: Int] = [:]
            for pending in order {
                guard let entry = latest[pending], entry.author != Replication.author,
                      let target = targets[pending.target] else { continue }
                let clock = entry.clock ?? HybridTimestamp(date: entry.timestamp)
                index[pending] = items.count
                items.append(PushItem(
                    change: try outgoing(target, key: pending.key, clock: clock.rawValue, token: entry.token.rawValue, in: tx),
                    target: pending.target, dirtyIDs: []))
            }
            try collections.dirty.forEach(in: tx) { id, dirty in
                guard let target = Mutation.Target(kindName: dirty.kind, name: dirty.name), let replicated = targets[target] else {
                    return true
                }
                let pending = PendingKey(target: target, key: dirty.key)
                if let at = index[pending] {
                    items[at].dirtyIDs.append(id)
                    if dirty.clock > items[at].change.clock {
                        items[at].change.clock = dirty.clock
                        items[at].change.token = dirty.token
                    }
                } else {
                    index[pending] = items.count
                    items.append(PushItem(
                        change: try outgoing(replicated, key: dirty.key, clock: dirty.clock, token: dirty.token, in: tx),
                        target: target, dirtyIDs: [id]))
                }
                return true
            }
            return (items, next)
        }
    }

    /// After history was purged past the replicator's token (what was pending there is gone from
    /// history): every key of every target is queued to be sent again, and the token moves to the end.
    /// The server keeps what it has; keys it has newer are settled as conflicts.
    private func requeueEverything() throws {
        try container.store.write(author: Replication.author) { tx in
            var state = try collections.replicaState(in: tx)
            let clock = HybridTimestamp.next(after: .zero, now: Date()).rawValue
            var queued: [QueuedKey] = []
            for (target, replicated) in targets {
                for key in try replicated.keys(tx) { queued.append(QueuedKey(target: target, key: key, clock: clock)) }
            }
            try queueToSendAgain(queued, state: &state, in: tx)
            try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
        }
        try consumer.resynchronized()
    }

    private struct QueuedKey {
        var target: Mutation.Target
        var key: [UInt8]
        var clock: UInt64
    }

    /// Queues keys to be sent although no pending history entry says so (`_sync.dirty`), each under a
    /// token of its own from ``ReplicaState/nextExtraToken``.
    private func queueToSendAgain(_ keys: [QueuedKey], state: inout ReplicaState, in tx: WriteTransaction) throws {
        var id = (try collections.dirty.last(in: tx)?.key ?? 0) + 1
        for queued in keys {
            let dirty = DirtyKey(kind: queued.target.kindName, name: queued.target.name, key: queued.key,
                                 clock: queued.clock, token: state.nextExtraToken)
            try tx.unrecorded { try collections.dirty.put(dirty, forKey: id, in: tx) }
            id += 1
            state.nextExtraToken += 1
        }
    }

    private func outgoing(_ target: ReplicatedTarget, key: [UInt8], clock: UInt64, token: UInt64,
                          in tx: ReadTransaction) throws -> OutgoingChange {
        let base = try versions[target.target]?.get(ByteKey(key), in: tx)?.version ?? 0
        return OutgoingChange(kind: target.target.kindName, name: target.target.name, key: key,
                              value: try target.read(key, tx), clock: clock, base: base, token: token)
    }

    /// Records the server's answers in one transaction: the versions of what it took, and the
    /// resolution of every conflict.
    private func record(_ outcomes: [PushOutcome], of batch: [PushItem], report: inout SyncReport) throws {
        var events: [SyncEvent] = []
        var changed = Set<Mutation.Target>()
        try container.store.write(author: Replication.author) { tx in
            var state = try collections.replicaState(in: tx)
            for (item, outcome) in zip(batch, outcomes) {
                guard let versions = versions[item.target], let target = targets[item.target] else { continue }
                let key = ByteKey(item.change.key)
                switch outcome {
                case .applied(let version):
                    try tx.unrecorded {
                        try versions.put(KeyVersion(version: version, clock: item.change.clock, device: device), forKey: key, in: tx)
                        for id in item.dirtyIDs { try collections.dirty.delete(id, in: tx) }
                        state.pushed += 1
                    }
                case .conflict(let version, let value, let clock, let remoteDevice):
                    // Written again since it was collected: settled next round, with that value.
                    guard try target.read(item.change.key, tx) == item.change.value else { continue }
                    try history.observeClock(HybridTimestamp(rawValue: clock), in: tx)
                    let remote = ServerChange(sequence: version, device: remoteDevice, kind: item.change.kind,
                                              name: item.change.name, key: item.change.key, value: value, clock: clock)
                    let resolution = try resolve(local: item.change.value, localClock: item.change.clock, remote: remote,
                                                 target: target, stage: .push, state: &state, in: tx)
                    try tx.unrecorded {
                        for id in item.dirtyIDs { try collections.dirty.delete(id, in: tx) }
                    }
                    if let resolution {
                        events.append(.conflict(resolution))
                        if resolution.resolution != .keptLocal { changed.insert(item.target) }
                    }
                }
            }
            state.conflicts += events.count
            try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
        }
        report.conflicts += events.count
        for event in events { self.events(event) }
        if !changed.isEmpty { self.events(.applied(targets: changed, changes: events.count)) }
    }

    // MARK: - Conflicts

    /// Settles `remote` against a local write of the same key that the server has not seen, inside
    /// `tx`: applies the winner, records the server version as the key's base, and queues what must be
    /// sent again. The remote change is on the server, the local one is not: reject-and-report keeps
    /// the remote. Returns nil when both values are the same: no conflict.
    private func resolve(local: [UInt8]?, localClock: UInt64, remote: ServerChange, target: ReplicatedTarget,
                         stage: ConflictEvent.Stage, state: inout ReplicaState,
                         in tx: WriteTransaction) throws -> ConflictEvent? {
        if local == remote.value {
            // The same value on both sides (two devices that synced the same key with a new server,
            // say): nothing to settle; the server's version becomes the key's base.
            try tx.unrecorded {
                try versions[target.target]?.put(KeyVersion(version: remote.sequence, clock: remote.clock, device: remote.device),
                                                  forKey: ByteKey(remote.key), in: tx)
            }
            return nil
        }
        let remoteWinsByClock = (remote.clock, remote.device) > (localClock, device)
        let resolution: ConflictEvent.Resolution
        var sendAgainClock: UInt64?   // the value sent is the key's, read when the queue is sent
        switch target.policy {
        case .rejectAndReport:
            resolution = .rejectedLocal
        case .merge(let merge):
            if let local, let remoteValue = remote.value {
                let merged = try merge(local, remoteValue, remote.key)
                let clock = HybridTimestamp.next(after: HybridTimestamp(rawValue: max(localClock, remote.clock)), now: Date())
                try target.write(remote.key, merged, tx)
                resolution = .merged
                sendAgainClock = clock.rawValue
            } else {
                resolution = remoteWinsByClock ? .tookRemote : .keptLocal
            }
        case .lastWriterWins:
            resolution = remoteWinsByClock ? .tookRemote : .keptLocal
        }
        switch resolution {
        case .tookRemote, .rejectedLocal:
            if try target.read(remote.key, tx) != remote.value { try target.write(remote.key, remote.value, tx) }
        case .keptLocal:
            if try target.read(remote.key, tx) != local { try target.write(remote.key, local, tx) }
            sendAgainClock = localClock
        case .merged:
            break
        }
        try tx.unrecorded {
            try versions[target.target]?.put(KeyVersion(version: remote.sequence, clock: remote.clock, device: remote.device),
                                              forKey: ByteKey(remote.key), in: tx)
        }
        if let sendAgainClock {
            try queueToSendAgain([QueuedKey(target: target.target, key: remote.key, clock: sendAgainClock)], state: &state, in: tx)
        }
        return ConflictEvent(target: target.target, key: remote.key, resolution: resolution, stage: stage,
                             localClock: HybridTimestamp(rawValue: localClock), remoteClock: HybridTimestamp(rawValue: remote.clock),
                             remoteDevice: remote.device, serverVersion: remote.sequence)
    }

    /// The clock of each key with a local write the server has not seen: pending history entries not
    /// by the replicator (the latest one wins) and dirty keys.
    private func pendingLocalClocks(in tx: ReadTransaction) throws -> [PendingKey: UInt64] {
        var clocks: [PendingKey: UInt64] = [:]
        let token = try consumer.token(in: tx)
        let filter = HistoryFilter(targets: Set(targets.keys))
        if case .changes(let transactions, _) = try history.changes(since: token, matching: filter, in: tx) {
            for transaction in transactions {
                for entry in transaction.entries {
                    let pending = PendingKey(target: entry.target, key: entry.key)
                    if entry.author == Replication.author {
                        clocks[pending] = nil
                    } else {
                        clocks[pending] = (entry.clock ?? HybridTimestamp(date: entry.timestamp)).rawValue
                    }
                }
            }
        }
        try collections.dirty.forEach(in: tx) { _, dirty in
            if let target = Mutation.Target(kindName: dirty.kind, name: dirty.name) {
                let pending = PendingKey(target: target, key: dirty.key)
                clocks[pending] = max(clocks[pending] ?? 0, dirty.clock)
            }
            return true
        }
        return clocks
    }

    // MARK: - Pull

    private func pull(_ server: ServerConnection, report: inout SyncReport) async throws -> Int {
        var pulled = 0
        while true {
            let (cursor, mark) = try currentCursor()
            let page = try await server.changes(group: group, after: cursor, limit: options.batchSize)
            // The log no longer holds what this device followed: a server restored from an older
            // backup, or its tables recreated.
            if cursor > page.lastSequence || (cursor > page.prunedThrough && mark != nil && page.atCursor != mark) {
                try rebaseOnForgetfulServer()
                continue
            }
            if cursor < page.prunedThrough {
                try await resynchronize(server, report: &report)
                continue
            }
            let changes = page.changes
            if changes.isEmpty { break }
            let events = try apply(changes, newCursor: changes[changes.count - 1].sequence, stage: .pull, pulled: &pulled)
            report.conflicts += events.count(where: \.isConflict)
            for event in events { self.events(event) }
        }
        return pulled
    }

    private func currentCursor() throws -> (Int64, CursorMark?) {
        try collections.store.read { tx in
            let state = try collections.state.get(Replication.stateKey, in: tx)
            return (state?.cursor ?? 0, state?.cursorMark)
        }
    }

    /// Checks what it can before writing anything: a row no replicator writes is refused whole.
    private func validate(_ change: ServerChange) throws {
        func refuse(_ reason: String) -> ReplicationError { .malformedServerRow(sequence: change.sequence, reason: reason) }
        guard change.sequence > 0 else { throw refuse("its sequence number is not positive") }
        guard !change.device.isEmpty, change.device.utf8.count <= 200 else { throw refuse("its device id is empty or too long") }
        guard let target = Mutation.Target(kindName: change.kind, name: change.name) else {
            throw refuse("its kind '\(change.kind.prefix(40))' is neither collection nor defaults")
        }
        guard !change.name.isEmpty, change.name.utf8.count <= 200 else { throw refuse("\(target) has an invalid name") }
        guard !change.key.isEmpty, change.key.count <= Store.maxKeySize else {
            throw refuse("its key is \(change.key.count) bytes (1 to \(Store.maxKeySize))")
        }
    }

    /// Applies other devices' changes and moves the cursor, in one transaction.
    private func apply(_ changes: [ServerChange], newCursor: Int64, stage: ConflictEvent.Stage,
                       pulled: inout Int) throws -> [SyncEvent] {
        for change in changes { try validate(change) }
        var events: [SyncEvent] = []
        var applied = 0
        var touched = Set<Mutation.Target>()
        do {
            try container.store.write(author: Replication.author) { tx in
                var state = try collections.replicaState(in: tx)
                var pending = try pendingLocalClocks(in: tx)
                for change in changes {
                    if change.device == device && stage == .pull {
                        // This device's own change: already here. Its version is the key's base, unless
                        // a later one is known.
                        if let targetID = Mutation.Target(kindName: change.kind, name: change.name),
                           let versions = versions[targetID],
                           try (versions.get(ByteKey(change.key), in: tx)?.version ?? 0) < change.sequence {
                            try tx.unrecorded {
                                try versions.put(KeyVersion(version: change.sequence, clock: change.clock, device: device),
                                                 forKey: ByteKey(change.key), in: tx)
                            }
                        }
                        continue
                    }
                    guard let targetID = Mutation.Target(kindName: change.kind, name: change.name),
                          let target = targets[targetID] else { continue }   // not replicated here
                    do {
                        try history.observeClock(HybridTimestamp(rawValue: change.clock), in: tx)
                        // Older than a version this device already has (its own change that won a
                        // conflict after this one, say): superseded, not news.
                        if stage == .pull,
                           let known = try versions[targetID]?.get(ByteKey(change.key), in: tx), known.version >= change.sequence {
                            continue
                        }
                        let pendingKey = PendingKey(target: targetID, key: change.key)
                        if let localClock = pending[pendingKey] {
                            if let event = try resolve(local: try target.read(change.key, tx), localClock: localClock, remote: change,
                                                       target: target, stage: stage, state: &state, in: tx) {
                                // Once the remote value is in, no local write of the key is left pending.
                                if event.resolution == .tookRemote || event.resolution == .rejectedLocal { pending[pendingKey] = nil }
                                events.append(.conflict(event))
                            }
                        } else {
                            if try target.read(change.key, tx) != change.value { try target.write(change.key, change.value, tx) }
                            try tx.unrecorded {
                                try versions[targetID]?.put(KeyVersion(version: change.sequence, clock: change.clock, device: change.device),
                                                            forKey: ByteKey(change.key), in: tx)
                            }
                        }
                        applied += 1
                        touched.insert(targetID)
                    } catch let error as KVStoreError {
                        throw ReplicationError.malformedServerRow(sequence: change.sequence, reason: error.description)
                    }
                }
                state.cursor = newCursor
                // After a resync the cursor is the server's last sequence, not a change seen here.
                let last = changes.last
                state.cursorMark = stage == .pull && last?.sequence == newCursor ? last.map { CursorMark(device: $0.device, token: $0.token) } : nil
                state.pulled += applied
                state.conflicts += events.count
                try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
            }
        }
        pulled += applied
        if !touched.isEmpty { events.append(.applied(targets: touched, changes: applied)) }
        return events
    }

    /// Reloads the targets from the server's current state after the log was pruned past the cursor.
    private func resynchronize(_ server: ServerConnection, report: inout SyncReport) async throws {
        let (last, rows) = try await server.currentState(group: group)
        for row in rows { try validate(row) }
        var pulled = 0
        let events = try apply(rows, newCursor: last, stage: .resync, pulled: &pulled)
        // Keys the server no longer has (and no pending local write): deleted, in a second transaction
        // (the first already moved the cursor; a crash between them leaves stale keys that the next
        // expiry, or the next write of them, settles).
        try deleteKeys(notIn: rows)
        report.pulled += pulled
        report.conflicts += events.count(where: \.isConflict)
        report.resynchronized = true
        for event in events { self.events(event) }
        self.events(.resynchronized(cursor: last))
    }

    private func deleteKeys(notIn rows: [ServerChange]) throws {
        var onServer: [Mutation.Target: Set<[UInt8]>] = [:]
        for row in rows where row.value != nil {
            if let target = Mutation.Target(kindName: row.kind, name: row.name) { onServer[target, default: []].insert(row.key) }
        }
        try container.store.write(author: Replication.author) { tx in
            let pending = try pendingLocalClocks(in: tx)
            for (id, target) in targets {
                for key in try target.keys(tx) where !(onServer[id]?.contains(key) ?? false) {
                    if pending[PendingKey(target: id, key: key)] == nil { try target.write(key, nil, tx) }
                }
            }
            var state = try collections.replicaState(in: tx)
            state.resyncs += 1
            try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
        }
    }

    // MARK: - Bookkeeping

    private func recordSuccess() throws -> Int64 {
        try container.store.write { tx in
            var state = try collections.replicaState(in: tx)
            state.lastSyncAt = Date()
            state.lastError = nil
            try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
            return state.cursor
        }
    }

    private func recordFailure(_ message: String) throws {
        try container.store.write { tx in
            var state = try collections.replicaState(in: tx)
            state.lastError = message
            state.lastErrorAt = Date()
            try tx.unrecorded { try collections.state.put(state, forKey: Replication.stateKey, in: tx) }
        }
    }
}
#endif
