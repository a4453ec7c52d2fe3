#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// This process's ownership of a container's sync: the container's `.sync.lock`, held exclusively
/// (`flock`), and the owner's record in the container for every other process to read. The kernel
/// releases the lock when the process exits or is killed, so a process waiting to own takes it at once.
/// A replicator (SyncKitPostgres) holds one for its lifetime.
package final class SyncOwnership: Sendable {
    package let service: SyncService
    private let descriptor: Int32
    private let state = Locked<(owner: SyncOwner, released: Bool)>((SyncOwner.current(mode: .once), false))

    package var owner: SyncOwner { state.withLock { $0.owner } }

    private init(service: SyncService, descriptor: Int32, owner: SyncOwner) {
        self.service = service
        self.descriptor = descriptor
        state.withLock { $0.owner = owner }
    }

    /// Takes ownership of `container`'s sync, or returns the live owner's record (`nil` for an owner
    /// that has not recorded itself yet) when another process holds it.
    ///
    /// - Throws: ``SyncError/ownershipConflict(_:)`` if the record names another live owner although
    ///   the lock was free: two owners at once, which must never be (the lock file was replaced, say).
    package static func acquire(_ container: SharedContainer, mode: SyncOwner.Mode) throws -> Result<SyncOwnership, SyncOwnerHeld> {
        let service = try SyncService(container: container)
        // Opened as every file of the container is (``KVStore/ContainerFile``): a FIFO, socket, device or
        // link planted there is refused at once, in one line, and never locked or followed; in
        // group-shared mode the file is the group's (0660), so that any member may take ownership.
        let lockPath = container.path + "/" + Self.lockName
        let fd = try ContainerFile.open(atPath: lockPath, access: .readWrite, create: true,
                                        fileMode: container.options.sharing.fileMode,
                                        repairs: !container.options.readOnly).fd
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            Glibc.close(fd)
            let recorded = try? service.container.store.read { try service.states.get(SyncService.stateKey, in: $0)?.owner }
            return .failure(SyncOwnerHeld(owner: recorded.flatMap { $0.isAlive ? $0 : nil }))
        }
        let owner = SyncOwner.current(mode: mode)
        do {
            // A killed owner's lock is released when its descriptors close, a moment before the
            // kernel makes it a zombie: a recorded owner that still looks alive is given a short grace
            // to finish dying before it counts as a second owner.
            if let recorded = try service.container.store.read({ try service.states.get(SyncService.stateKey, in: $0) })?.owner,
               recorded.pid != owner.pid {
                let grace = ContinuousClock.now + Self.dyingOwnerGrace
                while recorded.isAlive && ContinuousClock.now < grace { usleep(2_000) }
            }
            try container.store.write { tx in
                var state = try service.states.get(SyncService.stateKey, in: tx) ?? SyncServiceState()
                if let previous = state.owner, previous.pid != owner.pid, previous.isAlive {
                    throw SyncError.ownershipConflict(previous)
                }
                state.owner = owner
                try tx.unrecorded { try service.states.put(state, forKey: SyncService.stateKey, in: tx) }
            }
        } catch {
            Self.unlockAndClose(fd)
            throw error
        }
        service.posted()
        return .success(SyncOwnership(service: service, descriptor: fd, owner: owner))
    }

    /// The lock file's name in the container's directory.
    package static let lockName = ".sync.lock"

    /// How long a recorded owner may still look alive after its lock was released (it is exiting).
    static let dyingOwnerGrace: Duration = .seconds(1)

    /// Records how the owner syncs now (a replicator that goes live).
    package func setMode(_ mode: SyncOwner.Mode) throws {
        let owner = state.withLock { state -> SyncOwner in
            state.owner.mode = mode
            return state.owner
        }
        try service.container.store.write { tx in
            var record = try service.states.get(SyncService.stateKey, in: tx) ?? SyncServiceState()
            record.owner = owner
            try tx.unrecorded { try service.states.put(record, forKey: SyncService.stateKey, in: tx) }
        }
        service.posted()
    }

    /// In the transaction that records a successful round: every local change through
    /// `consumerToken` is on the server, and so are the changes from other devices right after it.
    /// `complete` is false when keys wait to be sent again (a conflict held them back): the
    /// acknowledged token then stays where it was. Keys that wait behind a quarantined change do not
    /// count against `complete`: they are `held`, and a request is acknowledged except for them.
    package func recordSuccess(consumerToken: ChangeToken, complete: Bool, held: HeldKeys? = nil, now: Date,
                               in tx: WriteTransaction) throws {
        var record = try service.states.get(SyncService.stateKey, in: tx) ?? SyncServiceState()
        record.held = held
        if complete {
            let through = try service.history.lastEntry(after: consumerToken, whileBy: SyncService.replicationAuthor,
                                                        limit: SyncService.maxPendingCounted, in: tx)
            record.acknowledged = max(record.acknowledged, through)
        }
        record.lastSyncAt = now
        record.lastError = nil
        record.rounds += 1
        record.owner = owner
        try tx.unrecorded { try service.states.put(record, forKey: SyncService.stateKey, in: tx) }
    }

    /// In the transaction that acknowledges a push (the push consumer's token), before the round ends:
    /// a request waiting for it returns without waiting for the round's pull.
    /// The keys `held` are recorded with it, before a request can see the token go past their writes.
    package func recordAcknowledged(consumerToken: ChangeToken, complete: Bool, held: HeldKeys? = nil, in tx: WriteTransaction) throws {
        guard complete else { return }
        var record = try service.states.get(SyncService.stateKey, in: tx) ?? SyncServiceState()
        let through = try service.history.lastEntry(after: consumerToken, whileBy: SyncService.replicationAuthor,
                                                    limit: SyncService.maxPendingCounted, in: tx)
        guard through > record.acknowledged || record.held != held else { return }
        record.held = held
        record.acknowledged = max(record.acknowledged, through)
        record.owner = owner
        try tx.unrecorded { try service.states.put(record, forKey: SyncService.stateKey, in: tx) }
    }

    /// Records which keys wait behind quarantined changes (`nil`: none), as settling one changes it.
    package func recordHeld(_ held: HeldKeys?, in tx: WriteTransaction) throws {
        var record = try service.states.get(SyncService.stateKey, in: tx) ?? SyncServiceState()
        guard record.held != held else { return }
        record.held = held
        try tx.unrecorded { try service.states.put(record, forKey: SyncService.stateKey, in: tx) }
    }

    /// In the transaction that records a failed round.
    package func recordFailure(_ failure: SyncFailure, in tx: WriteTransaction) throws {
        var record = try service.states.get(SyncService.stateKey, in: tx) ?? SyncServiceState()
        record.lastError = failure
        record.owner = owner
        try tx.unrecorded { try service.states.put(record, forKey: SyncService.stateKey, in: tx) }
    }

    /// After a commit that recorded a round: wakes requests and observers.
    package func posted() { service.posted() }

    /// Gives ownership up: the record no longer names this process, and the lock is released.
    package func release() {
        let wasHeld = state.withLock { state -> Bool in
            defer { state.released = true }
            return !state.released
        }
        guard wasHeld else { return }
        let pid = owner.pid
        _ = try? service.container.store.write { tx in
            guard var record = try service.states.get(SyncService.stateKey, in: tx), record.owner?.pid == pid else { return }
            record.owner = nil
            try tx.unrecorded { try service.states.put(record, forKey: SyncService.stateKey, in: tx) }
        }
        Self.unlockAndClose(descriptor)
        service.posted()
    }

    /// Unlocks, then closes. The lock belongs to the open file description, not to the descriptor: a
    /// child that another thread of this process forked and that has not called `exec` yet (as
    /// `Process.run` does on every spawn) holds a copy of the descriptor, and closing this one alone
    /// would leave the lock held until that child execs or exits, so that a standby could not take
    /// over (issue 46: a CI run lost a test to it under AddressSanitizer). `LOCK_UN` releases it for
    /// every copy at once.
    private static func unlockAndClose(_ fd: Int32) {
        _ = SystemCall.retry { flock(fd, LOCK_UN) }
        Glibc.close(fd)
    }

    deinit { release() }
}

/// Another process owns the container's sync.
package struct SyncOwnerHeld: Error, Sendable {
    /// Its record; `nil` when it has not recorded itself yet.
    package var owner: SyncOwner?
}

extension SyncService {
    /// Posts ``statusNotification`` (a failed post loses nothing: waiters also poll).
    func posted() {
        try? ChangeNotifier(container: container).post(Self.statusNotification)
    }
}
