#if PostgreSQL
import Foundation
import KVStore
import Logging
import PostgresNIO
import SyncKitPostgres

/// The gateway's hot standby for reads (`--read-database-url`, issue 51): pulls (`GET /v1/changes`)
/// read their page there, and the live streams' wake-ups wait until it has replayed the commit that
/// woke them; everything else (pushes, credentials, revocations, `LISTEN`, resyncs) stays on the
/// primary.
///
/// Two positions, each exact for what it guards:
/// - a device's own writes: the group's sequence number. A push's answer already names the version
///   of every change it applied; the device sends the largest with its next pull
///   (``SyncWire/GatewayHeader/through``), and a page read from the replica whose group is not yet
///   that far is read again (until ``maxWait``), then from the primary.
/// - a wake-up: the primary's WAL position (`pg_current_wal_lsn()`) read after the notification came
///   (the commit that notified is before it); the streams of the woken groups are told once the
///   replica's `pg_last_wal_replay_lsn()` has reached it, so that the pull the wake-up causes finds
///   the row. After ``maxWait`` they are told anyway, and told again once the replica gets there.
final class ReadReplica: Sendable {
    let url: ServerURL
    let link: DatabaseLink
    /// The longest a read waits for the replica before it reads the primary (or a wake-up is sent
    /// without waiting any longer).
    static let maxWait: Duration = .seconds(2)
    /// The name the replica's watch gives it (``SyncGateway/watchDatabase(_:listening:)``): not a name the
    /// directory can give a database (``SyncDirectory/isValidName(_:)``).
    static let watchName = "(read replica)"
    /// How long a late wake-up waits for the replica before it gives up (the device is woken by the
    /// next commit of its group, or by its own next pull).
    static let maxLateWait: Duration = .seconds(60)
    /// How often the replica is asked how far it has replayed while something waits for it.
    static let pollInterval: Duration = .milliseconds(5)
    /// The longest pause between a pull's reads of a replica that is not yet as far as the device's
    /// own last push.
    static let maxPollInterval: Duration = .milliseconds(50)

    /// The groups woken since the gate last took them, and whether the gate was signalled.
    private let woken = Locked<Set<String>>([])
    let signals: AsyncStream<Void>
    private let signal: AsyncStream<Void>.Continuation
    /// The largest replay position the replica reported (its WAL position as a number), so that a
    /// wait for a position it has passed asks nothing.
    private let replayed = Locked<Int64>(0)

    init(url: ServerURL, connections: Int, logger: Logger) throws {
        self.url = url
        link = DatabaseLink(configuration: try url.poolConfiguration(connections: connections), logger: logger)
        (signals, signal) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// A notification for `group` came: its streams are woken once the replica has the commit.
    func wake(_ group: String) {
        woken.withLock { _ = $0.insert(group) }
        signal.yield()
    }

    /// The groups woken since the last call.
    func takeWoken() -> Set<String> {
        woken.withLock { groups in
            defer { groups.removeAll(keepingCapacity: false) }
            return groups
        }
    }

    /// Whether the replica has replayed the WAL up to `position` (a number, as ``lsnQuery`` reads
    /// it), waiting for it up to `bound`; false when it has not by then, or cannot be asked.
    func waitUntilReplayed(_ position: Int64, within bound: Duration) async -> Bool {
        let deadline = ContinuousClock.now + bound
        while replayed.withLock({ $0 }) < position {
            guard link.status.up, let now = try? await replayPosition() else { return false }
            replayed.withLock { $0 = max($0, now) }
            if now >= position { return true }
            guard ContinuousClock.now + Self.pollInterval < deadline else { return false }
            try? await Task.sleep(for: Self.pollInterval)
        }
        return true
    }

    /// How far the replica has replayed; `Int64.max` when it is not in recovery (a standby promoted
    /// since, or a primary given as the replica: it is behind nothing).
    func replayPosition() async throws -> Int64 {
        try await Self.position(of: link.client, "SELECT (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::int8") ?? .max
    }

    /// The one number `sql` answers, on a connection of `client`'s pool.
    static func position(of client: PostgresClient, _ sql: String) async throws -> Int64? {
        var found: Int64?
        for try await (value) in try await client.query(PostgresQuery(unsafeSQL: sql)).decode(Int64?.self) { found = value }
        return found
    }
}
#endif
