#if PostgreSQL
import Foundation
import Logging
import PostgresNIO
import SyncKitPostgres

extension SyncGateway {
    /// How long one wake-up (a connection of the pool, then `SELECT pg_notify`) or one poll may take
    /// before it is given up (the poll comes again; a lost wake-up is what the poll is for).
    static let wakeTimeout: Duration = .seconds(5)
    /// How long after a round first saw a group's end a notification for a commit that end includes
    /// may still come (its wake-up's own deadline, and twice over): a `LISTEN` that starts again wakes
    /// a group first seen within it, in case that notification was sent while nothing listened.
    static let notificationGrace: Duration = wakeTimeout * 2

    /// The gateway's ``WakeUps``: each sent on a connection of the pool, outside any transaction, while
    /// the database answers.
    static func wakeUps(link: DatabaseLink, options: Options) -> WakeUps {
        let logger = options.logger
        return WakeUps(window: options.wakeWindow) { group in
            // Tried even while the watch holds the database down (a probe that timed out on a loaded
            // machine): the wake-up has its own deadline, and one not sent is the poll's to find.
            let client = link.client
            _ = try? await withDeadline(wakeTimeout, what: "the database") {
                try await client.withConnection { connection in
                    try await ServerStatements(connection: connection, logger: logger, maxValueBytes: 0).wake(group: group)
                }
            }
        }
    }

    /// After a push of `group` through this gateway committed in `database`: its wake-up there, in a
    /// task of its own (the push's answer does not wait for it).
    func wakeAfterCommit(_ group: String, in database: GroupDatabase) {
        guard let wakeUps = wakeUps[database.name] else { return }
        Task { await wakeUps.wake(group) }
    }

    /// The ends of the logs of `target`'s groups that have live streams here (`kvsync_group_ends`, in a
    /// transaction as the gateway's role), read by one loop per database, which wakes the streams of a
    /// group whose end moved since it last read it, through the replica's gate as any wake-up:
    /// - every ``Options/wakePollInterval``, every such group: a push whose wake-up was lost reaches
    ///   the devices within the interval (and a query). Only the live groups are read: the poll costs as
    ///   many rows as the gateway has groups with devices. A group seen for the first time is only
    ///   noted (a stream's device reads the log when its stream opens; waking it again would be a
    ///   second read);
    /// - at once, the groups `target`'s `LISTEN` was notified of (``GroupDatabase/notified``), those
    ///   notified while a read was out together in the next; a notified group seen for the first time is
    ///   woken (the notification says it committed), and so is one a round saw first and only noted,
    ///   even if its end did not move since (that round may have read the notification's commit);
    /// - at once each time `target`'s `LISTEN` starts again (``NotifiedGroups/roundNow()``; until one
    ///   such round reads the ends, each round is one), every such group: those that moved are woken,
    ///   and so are those seen now for the first time, or first seen and only noted within
    ///   ``notificationGrace``, as if notified: a notification sent while nothing listened is lost,
    ///   and this round stands for it (a `LISTEN` that started again used to wake every stream of the
    ///   gateway).
    ///
    /// So one commit wakes a device once, whichever finds it first: a notification woke it and the
    /// next round found the end it had already read (before, the poll woke every device of the group
    /// a second time: two pulls a commit). Ends are read in one loop, never two reads at once, so an
    /// older read never replaces a newer one. A database that does not answer delays only its own
    /// groups; a notified group whose end could not be read is woken anyway.
    func pollLiveGroups(of target: GroupDatabase) async {
        let logger = options.logger
        let interval = options.wakePollInterval
        var known: [String: Int64] = [:]
        // Groups a round saw first without waking them: a round may read an end that includes a commit
        // whose notification is still on its way, which then would find nothing new.
        // With the time of that first sight: a notification sent for a commit before it reaches the
        // LISTEN within ``wakeTimeout`` and the wake-up window, or was lost.
        var unconfirmed: [String: ContinuousClock.Instant] = [:]
        var nextRound = ContinuousClock.now + interval
        // A round asked for whose read failed: the next round is it.
        var owed = false
        let ticker = Task { [notified = target.notified] in
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                notified.signal()
            }
        }
        defer { ticker.cancel() }
        // The read in a task of its own, cancelled at its deadline and when the loop is (the gateway
        // ends): a read left waiting on a pool that shut down held the gateway past its end (found by
        // LeakSanitizer: a gateway of each test that ran one in-process, alive at exit).
        func readEnds(_ groups: [String]) async -> [String: Int64]? {
            let client = target.link.client
            let read = Task {
                try await client.withTransaction(logger: logger) { connection in
                    try await ServerStatements.assumeGatewayRole(connection, local: true, logger: logger)
                    return try await ServerStatements(connection: connection, logger: logger, maxValueBytes: 0).groupEnds(groups)
                }
            }
            return await withTaskCancellationHandler {
                try? await withDeadline(Self.wakeTimeout, what: "the database", onTimeout: { read.cancel() }) { try await read.value }
            } onCancel: {
                read.cancel()
            }
        }
        for await _ in target.notified.signals {
            if Task.isCancelled { return }
            // A notification's groups are read at once, alone; those that come while a read is out
            // are taken together by the next (a burst costs a read per round trip, not per commit).
            // Asked for (the LISTEN started again: notifications may have been missed), or owed by
            // such a round whose read failed; or its time.
            let requested = target.notified.takeRound() || owed
            let round = requested || ContinuousClock.now >= nextRound
            // A notification came through this database's LISTEN: its group's commit is here.
            let notified = target.notified.take().filter(hub.isLive)
            let live = round ? Set(await liveGroupsByDatabase().first { $0.0.name == target.name }?.1 ?? []) : []
            let groups = Array(round ? live.union(notified) : notified)
            if round { nextRound = ContinuousClock.now + interval }
            guard !groups.isEmpty else {
                if round { wakePolls.withLock { $0 += 1 } }
                continue
            }
            guard let ends = await readEnds(groups) else {
                // Not read: a notified group is woken all the same; the others wait for the next round,
                // keeping what was known of them (a push missed now is found then, not taken as a first sight).
                for group in groups where notified.contains(group) { wake(group: group, in: target) }
                owed = requested
                continue
            }
            owed = false
            if round {
                known = known.filter { live.contains($0.key) || notified.contains($0.key) }
                unconfirmed = unconfirmed.filter { known[$0.key] != nil }
            }
            for group in groups {
                let end = ends[group] ?? 0
                let was = known[group]
                known[group] = end
                let wakes: Bool
                if let was, was != end {
                    wakes = true
                } else if notified.contains(group) {
                    // Seen for the first time, or seen so by a round that read the end after this
                    // notification's commit without waking: the notification is the proof of a commit.
                    wakes = was == nil || unconfirmed[group] != nil
                } else if requested {
                    // After a LISTEN that started again, the same, for a notification that may have been
                    // sent while nothing listened: of a group seen first now, or lately (one seen first
                    // longer ago had its notification while the LISTEN before this one was up).
                    wakes = was == nil || unconfirmed[group].map { ContinuousClock.now - $0 < Self.notificationGrace } == true
                } else {
                    // A round's first sight: only noted, until a notification or a move says more.
                    if was == nil { unconfirmed[group] = ContinuousClock.now }
                    continue
                }
                unconfirmed[group] = nil
                if wakes { wake(group: group, in: target) }
            }
            if round { wakePolls.withLock { $0 += 1 } }
        }
    }

    /// The groups with live streams here, by the database that holds them: the directory's last answer
    /// for each (read only for a group it has none for), every group in the home database when it
    /// places none elsewhere. A held group is left out (its streams are woken once it is placed).
    func liveGroupsByDatabase() async -> [(GroupDatabase, [String])] {
        var byName: [String: (GroupDatabase, [String])] = [:]
        for group in hub.groups {
            let target: GroupDatabase?
            switch directory.place(of: group)?.place {
            case .home: target = home
            case .named(let name): target = databases[name]
            case .held: target = nil
            case nil: target = try? await database(of: group)
            }
            guard let target else { continue }
            byName[target.name, default: (target, [])].1.append(group)
        }
        return Array(byName.values)
    }
}
#endif
