#if PostgreSQL
import Foundation
import Logging
import PostgresNIO
import SyncKitPostgres

extension SyncGateway {
    /// How long one wake-up (a connection of the pool, then `SELECT pg_notify`) or one poll may take
    /// before it is given up (the poll comes again; a lost wake-up is what the poll is for).
    static let wakeTimeout: Duration = .seconds(5)

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

    /// Every ``Options/wakePollInterval``, the newest sequence of each group this gateway has live
    /// streams for (`kvsync_group_ends`, in a transaction as the gateway's role); the streams of a group
    /// whose sequence moved since the last poll are woken. So a push whose wake-up was lost reaches the
    /// devices within the interval (and a query). Only the live groups are read: the poll costs as many
    /// rows as the gateway has groups with devices. A group seen for the first time is only noted (a
    /// stream's device reads the log when its stream opens; waking it again would be a second read).
    /// With several databases (``Options/groupDatabases``), each database is asked for its own groups,
    /// as the directory last placed them; a database that does not answer is skipped for the round.
    func pollLiveGroups() async {
        let logger = options.logger
        var known: [String: Int64] = [:]
        while !Task.isCancelled {
            try? await Task.sleep(for: options.wakePollInterval)
            // A group whose database did not answer this round keeps what was known of it, so that a
            // push it missed is still found the next round (rather than taken as the first sight).
            let live = await liveGroupsByDatabase()
            let liveGroups = Set(live.flatMap(\.1))
            var next = known.filter { liveGroups.contains($0.key) }
            for (target, groups) in live {
                let client = target.link.client
                guard let ends = try? await withDeadline(Self.wakeTimeout, what: "the database", {
                    try await client.withTransaction(logger: logger) { connection in
                        try await ServerStatements.assumeGatewayRole(connection, local: true, logger: logger)
                        return try await ServerStatements(connection: connection, logger: logger, maxValueBytes: 0).groupEnds(groups)
                    }
                }) else { continue }
                for group in groups {
                    let end = ends[group] ?? 0
                    next[group] = end
                    // Through the replica's gate, as a notification is (a home group's pull reads there).
                    if let was = known[group], was != end { wake(group: group, in: target) }
                }
            }
            known = next
            wakePolls.withLock { $0 += 1 }
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
