#if PostgreSQL
import Foundation
import KVStore
import Logging
import PostgresNIO
import SyncKitPostgres
import SyncWire

extension SyncGateway {
    /// A pull's page, read from `replica`: the credential is checked on the primary (a token revoked
    /// there is refused at once, whatever the replica's lag), then the page is read from the replica
    /// in a transaction scoped as the primary's would be. When the device's request names its own
    /// last push (``GatewayRequestHead/through``) and the replica's copy of the group is not that far
    /// yet, the page is read again until it is (after 5 ms, 10, 20, 40, then every 50 ms), for at most
    /// ``ReadReplica/maxWait``; then (or when the
    /// replica fails) from the primary. A replica is a prefix of the primary's commits, and a group's
    /// sequence numbers are committed in order, so a page from it never skips a row: it can only end
    /// sooner.
    func changesFromReplica(_ replica: ReadReplica, request: Admitted, after: Int64, limit: Int, maxBytes: Int) async throws -> ChangesPage {
        let (logger, maxValueBytes) = (options.logger, options.maxValueBytes)
        let principal: Principal
        switch request.credential {
        case .token:
            principal = try await pool().withTransaction(logger: logger) { connection in
                try await self.principal(of: request.credential, install: request.head.install, on: connection, logger: logger)
            }
        case .verified(let verified):
            principal = verified.installed(request.head.install)
        }
        if !request.counted { try check(principal, against: request.head) }
        let read = { (client: PostgresClient) in
            try await client.withTransaction(logger: logger) { connection in
                _ = try await Self.scope(principal, on: connection, logger: logger)
                return try await ServerStatements(connection: connection, logger: logger, maxValueBytes: maxValueBytes)
                    .changes(group: principal.group, after: after, limit: limit, maxBytes: maxBytes)
            }
        }
        let deadline = ContinuousClock.now + ReadReplica.maxWait
        // The pause between reads doubles up to ``ReadReplica/maxPollInterval``: a device that names a
        // sequence number the group never reaches costs the replica about 45 reads, then the primary one.
        var pause = ReadReplica.pollInterval
        while replica.link.status.up {
            guard let page = try? await read(replica.link.client) else { break }
            if max(page.lastSequence, page.changes.last?.sequence ?? 0) >= request.head.through ?? 0 { return page }
            guard ContinuousClock.now + pause < deadline else { break }
            try? await Task.sleep(for: pause)
            pause = min(pause * 2, ReadReplica.maxPollInterval)
        }
        return try await read(try pool())
    }

    /// A notification for `group` came from `database`: its streams are woken now, or, for a group of
    /// the home database with a replica, once the replica has replayed the commit
    /// (``gateWakes(through:)``; the replica is the home database's: other databases' groups read their
    /// own primary).
    func wake(group: String, in database: GroupDatabase) {
        if let replica, database === home { replica.wake(group) } else { hub.notify(group: group) }
    }

    /// Until cancelled: takes the groups woken since the last round, reads the primary's WAL position
    /// (the commits that notified are before it), waits until the replica has replayed it, and wakes
    /// the groups' streams. Past ``ReadReplica/maxWait`` they are woken anyway (a device that pulls
    /// then may find the replica still behind) and woken again once the replica gets there: a row is
    /// never left waiting for the group's next commit. Rounds follow each other, so the wake-ups that
    /// come during one are taken together by the next.
    func gateWakes(through replica: ReadReplica) async {
        for await _ in replica.signals {
            let groups = replica.takeWoken()
            guard !groups.isEmpty else { continue }
            guard let client = try? pool(),
                  let target = (try? await ReadReplica.position(of: client, "SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::int8")) ?? nil else {
                for group in groups { hub.notify(group: group) }
                continue
            }
            let reached = await replica.waitUntilReplayed(target, within: ReadReplica.maxWait)
            for group in groups { hub.notify(group: group) }
            if !reached {
                Task { [hub] in
                    guard await replica.waitUntilReplayed(target, within: ReadReplica.maxLateWait) else { return }
                    for group in groups { hub.notify(group: group) }
                }
            }
        }
    }
}
#endif
