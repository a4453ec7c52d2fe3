#if PostgreSQL
import Foundation
import KVStore
import SyncKitPostgres
#if canImport(Glibc)
import Glibc
#endif

/// A hot standby of a cluster, for the tests of read replicas and of failover: a cluster of its own
/// (temporary directory, port, socket directory, ``stop(immediate:)``, ``psql(_:as:)``) whose data
/// directory is a `pg_basebackup -R` of the primary, streaming its WAL over the primary's Unix socket.
///
/// `initdb` (PostgreSQL 10 and later) already gives what streaming needs: `wal_level=replica`,
/// `max_wal_senders=10`, and `local replication all trust` in `pg_hba.conf`, so the primary needs no
/// change, except for ``synchronous`` standbys (`synchronous_standby_names`, set with `ALTER SYSTEM`
/// and a reload).
extension LocalPostgresCluster {
    /// Makes a hot standby of `primary` and starts it.
    ///
    /// - Parameters:
    ///   - applyDelay: `recovery_min_apply_delay`: the standby replays each commit this long after the
    ///     primary made it (a replica that lags, on purpose).
    ///   - synchronous: names the standby in the primary's `synchronous_standby_names`, so that every
    ///     commit on the primary waits until the standby has flushed it (not replayed: that is
    ///     `synchronous_commit=remote_apply`); returns once the primary reports it `sync`.
    /// - Throws: ``ReplicationError/server(_:)`` naming the step that failed (`pg_basebackup`,
    ///   `pg_ctl`), or a standby the primary never reported streaming within 60 s.
    public convenience init(standbyOf primary: LocalPostgresCluster, applyDelay: Duration? = nil, synchronous: Bool = false) throws {
        try self.init(port: nil, tryingFirst: nil, makeData: { standby in
            try standby.run(standby.binaries + "/pg_basebackup", [
                "-D", standby.dataDirectory, "-h", primary.socketDirectory, "-p", "\(primary.port)", "-U", primary.user,
                "-R", "-X", "stream", "-c", "fast", "--no-sync",
            ])
            // Later lines of postgresql.auto.conf win: our own connection string (with the name the
            // primary knows the standby by), the delay, and none of the primary's synchronous standbys
            // (copied with its configuration; a promoted standby would otherwise wait for itself).
            var settings = """

                primary_conninfo = 'host=\(primary.socketDirectory) port=\(primary.port) user=\(primary.user) application_name=\(standby.standbyName)'
                hot_standby_feedback = on
                synchronous_standby_names = ''

                """
            if let applyDelay {
                settings += "recovery_min_apply_delay = '\(Int(applyDelay / .milliseconds(1)))ms'\n"
            }
            let file = standby.dataDirectory + "/postgresql.auto.conf"
            guard let handle = FileHandle(forWritingAtPath: file) else { throw ReplicationError.server("cannot open \(file)") }
            defer { try? handle.close() }
            try handle.seekToEnd()
            try handle.write(contentsOf: Data(settings.utf8))
        }, afterStart: { standby in
            if synchronous {
                try primary.psql("ALTER SYSTEM SET synchronous_standby_names = '\"\(standby.standbyName)\"'")
                try primary.psql("SELECT pg_reload_conf()")
            }
            let wanted = synchronous ? "sync" : "async"
            try standby.waitUntil("the primary never reported the standby \(wanted)") {
                try primary.psql("SELECT sync_state FROM pg_stat_replication WHERE application_name = '\(standby.standbyName)'")
                    .trimmingCharacters(in: .whitespacesAndNewlines) == wanted
            }
        })
    }

    /// The name the primary knows this standby by (`application_name`), from its temporary directory.
    public var standbyName: String {
        "kvstandby_" + (directory as NSString).lastPathComponent.lowercased().map { $0.isLetter || $0.isNumber ? String($0) : "_" }.joined()
    }

    /// The position of the end of the WAL this server has written (`pg_current_wal_lsn()`), for a
    /// primary.
    public func currentLSN() throws -> String {
        try psql("SELECT pg_current_wal_lsn()").trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Waits until this standby has replayed the WAL up to `lsn` (`pg_last_wal_replay_lsn()`).
    public func waitUntilReplayed(_ lsn: String, timeout: Duration = .seconds(60)) throws {
        try waitUntil("the standby did not replay \(lsn) within \(timeout)", timeout: timeout) {
            try psql("SELECT pg_last_wal_replay_lsn() >= '\(lsn)'::pg_lsn").trimmingCharacters(in: .whitespacesAndNewlines) == "t"
        }
    }

    /// Waits until this standby has replayed everything `primary` had written when called.
    public func catchUp(with primary: LocalPostgresCluster, timeout: Duration = .seconds(60)) throws {
        try waitUntilReplayed(try primary.currentLSN(), timeout: timeout)
    }

    /// Promotes this standby (`pg_ctl promote`) and waits until it accepts writes.
    public func promote() throws {
        try run(binaries + "/pg_ctl", ["-D", dataDirectory, "-w", "-t", "60", "promote"])
        try waitUntil("the promoted standby still refuses writes") {
            try psql("SELECT pg_is_in_recovery()").trimmingCharacters(in: .whitespacesAndNewlines) == "f"
        }
    }

    /// Makes this primary wait for no standby any more (`synchronous_standby_names = ''`): before a
    /// test stops its synchronous standby, whose absence would otherwise hold every commit.
    public func dropSynchronousStandbys() throws {
        try psql("ALTER SYSTEM RESET synchronous_standby_names")
        try psql("SELECT pg_reload_conf()")
    }

    /// Polls `condition` every 20 ms until it holds, or throws `failure` after `timeout`.
    func waitUntil(_ failure: String, timeout: Duration = .seconds(60), _ condition: () throws -> Bool) throws {
        let deadline = ContinuousClock.now + timeout
        while try !condition() {
            guard ContinuousClock.now < deadline else { throw ReplicationError.server(failure) }
            usleep(20_000)
        }
    }
}
#endif
