#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import PostgresTesting
import TestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// One machine of a test: its own root directory and container, a `notes` collection and a
/// `settings` suite, both declared replicated.
final class Device: @unchecked Sendable {
    let directory = TemporaryDirectory()
    let group: String
    let container: SharedContainer
    let history: History
    let notes: KVCollection<String, String>
    let settings: SharedDefaults

    init(group: String) throws {
        self.group = group
        container = try SharedContainer(groupIdentifier: group, root: directory.path)
        history = try History.attach(to: container)
        notes = try container.store.collection("notes", key: String.self, value: String.self)
        settings = try container.defaults(suite: "settings")
        try Replication.enable(.collection("notes"), in: container)
        try Replication.enable(.defaults("settings"), in: container)
    }

    var targets: [ReplicatedTarget] { [.collection(notes), .defaults(settings)] }

    func replicator(_ server: ServerURL, options: Replicator.Options = Replicator.Options(),
                    events: @escaping @Sendable (SyncEvent) -> Void = { _ in }) throws -> Replicator {
        try Replicator(container: container, server: server, targets: targets, options: options, events: events)
    }

    /// A write by the app (synchronous: callable from async tests).
    func write(_ body: (WriteTransaction) throws -> Void) throws {
        try container.store.write(author: "app", body)
    }

    func put(_ value: String, _ key: String) throws {
        try container.store.write(author: "app") { tx in try notes.put(value, forKey: key, in: tx) }
    }

    func delete(_ key: String) throws {
        try container.store.write(author: "app") { tx in _ = try notes.delete(key, in: tx) }
    }

    /// `notes` as `key=value` lines in key order.
    func noteLines() throws -> [String] {
        try notes.entries().map { "\($0.key)=\($0.value)" }
    }

    /// The stored bytes of `notes` as `hexkey:hexvalue`, comparable with the server's state.
    func storedNotes() throws -> [String] {
        try container.store.untypedCollection(named: "notes").collection.entries().map {
            Hex.encode($0.key.bytes) + ":" + Hex.encode($0.value)
        }
    }

    /// `kvtool ARGS --root ROOT --group GROUP` as a process of its own.
    func kvtool(_ arguments: [String], timeout: TimeInterval = 120) throws -> ProcessResult {
        try run(productsDirectory() + "/kvtool", arguments + ["--root", directory.path, "--group", group], timeout: timeout)
    }

    func kvtoolInBackground(_ arguments: [String]) throws -> BackgroundProcess {
        try BackgroundProcess(productsDirectory() + "/kvtool", arguments + ["--root", directory.path, "--group", group])
    }

    /// `kvtool sync run --server URL --seconds N`: a live replicator in a process of its own.
    func liveReplicator(_ url: String, seconds: Int) throws -> BackgroundProcess {
        try kvtoolInBackground(["sync", "run", "--server", url, "--seconds", "\(seconds)"])
    }

    func status() throws -> ReplicationStatus { try Replication.status(of: container) }
}

/// Sends SIGTERM to each process and waits for it (30 s each); whether all ended before their deadline.
func stop(_ processes: [BackgroundProcess]) -> Bool {
    for process in processes { process.kill(SIGTERM) }
    for process in processes { _ = process.wait(timeout: 30) }
    return processes.allSatisfy { !$0.timedOut }
}

extension LocalPostgresCluster {
    /// The server's current `notes` of `group`, as `hexkey:hexvalue` in key order.
    func storedNotes(group: String) throws -> [String] {
        try psql("""
            SELECT encode(key, 'hex') || ':' || encode(value, 'hex') FROM kvsync_state
            WHERE group_id = '\(group)' AND kind = 'collection' AND name = 'notes' AND value IS NOT NULL ORDER BY key
            """).split(separator: "\n").map(String.init)
    }

    func count(_ sql: String) throws -> Int {
        Int(try psql(sql).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }
}

/// Calls `body` until it returns true or `seconds` pass; whether it did.
func eventually(_ seconds: Double, every microseconds: UInt32 = 5_000, _ body: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try body() { return true }
        usleep(microseconds)
    }
    return try body()
}
/// The resync both paths (direct and through a gateway) must handle: A writes 20 keys and both devices
/// sync; B goes offline while A deletes ten and rewrites one; `prune` prunes everything, B's cursor
/// included. B, with a write of its own pending, resyncs (and says so), keeps its write, and both
/// converge with the server.
func expectResyncAfterAPruneThatPassedACursor(_ cluster: LocalPostgresCluster, group: String,
                                              a: Device, _ ra: Replicator, b: Device, _ rb: Replicator,
                                              resynced: Locked<Bool>, prune: () async throws -> Int64) async throws {
    for i in 0..<20 { try a.put("v\(i)", "k\(i)") }
    try await ra.sync(); try await rb.sync()
    #expect(try b.noteLines().count == 20)
    for i in 0..<10 { try a.delete("k\(i)") }
    try a.put("new", "k5")
    try await ra.sync()
    // Nine tombstones: k5 was written again.
    #expect(try await offPool { try cluster.count("SELECT count(*) FROM kvsync_state WHERE group_id = '\(group)' AND value IS NULL") } == 9)
    #expect(try await prune() > 0)
    try b.put("b's pending write survives", "b-only")
    let report = try await rb.sync()
    #expect(report.resynchronized && resynced.withLock { $0 })
    try await ra.sync()
    #expect(try await offPool { try b.storedNotes() == cluster.storedNotes(group: group) })
    #expect(try a.noteLines() == b.noteLines())
    #expect(try b.noteLines().contains("b-only=b's pending write survives"))
    #expect(try !b.noteLines().contains { $0.hasPrefix("k1=") })
}
#endif
