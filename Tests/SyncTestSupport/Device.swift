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
public final class Device: @unchecked Sendable {
    public let directory = TemporaryDirectory()
    public let group: String
    public let container: SharedContainer
    public let history: History
    public let notes: KVCollection<String, String>
    public let settings: SharedDefaults

    public init(group: String) throws {
        self.group = group
        container = try SharedContainer(groupIdentifier: group, root: directory.path)
        history = try History.attach(to: container)
        notes = try container.store.collection("notes", key: String.self, value: String.self)
        settings = try container.defaults(suite: "settings")
        try Replication.enable(.collection("notes"), in: container)
        try Replication.enable(.defaults("settings"), in: container)
    }

    /// The store keeps its history (a write observer) until it is closed, and the history keeps the
    /// store: without this, every device's files stayed open until the test process exited, and the
    /// parallel suites reached the ~1,300 open descriptors at which Foundation's `Process.run()` reads
    /// past its buffer (scripts/sanitize/asan.supp) and crashed the test process (CI, issue 46).
    ///
    /// A sync agent registered for it (`kvtool sync agent set`, in the user's configuration directory,
    /// outside the container) is removed with it.
    deinit {
        _ = try? SyncAgentRegistration.remove(from: container)
        container.close()
    }

    public var targets: [ReplicatedTarget] { [.collection(notes), .defaults(settings)] }

    public func replicator(_ server: ServerURL, options: Replicator.Options = Replicator.Options(),
                    events: @escaping @Sendable (SyncEvent) -> Void = { _ in }) throws -> Replicator {
        try Replicator(container: container, endpoint: .database(server), targets: targets, options: options, events: events)
    }

    /// A write by the app (synchronous: callable from async tests).
    public func write(_ body: (WriteTransaction) throws -> Void) throws {
        try container.store.write(author: "app", body)
    }

    public func put(_ value: String, _ key: String) throws {
        try container.store.write(author: "app") { tx in try notes.put(value, forKey: key, in: tx) }
    }

    public func delete(_ key: String) throws {
        try container.store.write(author: "app") { tx in _ = try notes.delete(key, in: tx) }
    }

    /// `notes` as `key=value` lines in key order.
    public func noteLines() throws -> [String] {
        try notes.entries().map { "\($0.key)=\($0.value)" }
    }

    /// The stored bytes of `notes` as `hexkey:hexvalue`, comparable with the server's state.
    public func storedNotes() throws -> [String] {
        try container.store.untypedCollection(named: "notes").collection.entries().map {
            Hex.encode($0.key.bytes) + ":" + Hex.encode($0.value)
        }
    }

    /// `kvtool ARGS --root ROOT --group GROUP` as a process of its own.
    public func kvtool(_ arguments: [String], timeout: TimeInterval = 120) throws -> ProcessResult {
        try run(productsDirectory() + "/kvtool", arguments + ["--root", directory.path, "--group", group], timeout: timeout)
    }

    public func kvtoolInBackground(_ arguments: [String]) throws -> BackgroundProcess {
        try BackgroundProcess(productsDirectory() + "/kvtool", arguments + ["--root", directory.path, "--group", group])
    }

    /// `kvtool sync run --server URL --seconds N`: a live replicator in a process of its own.
    public func liveReplicator(_ url: String, seconds: Int) throws -> BackgroundProcess {
        try kvtoolInBackground(["sync", "run", "--server", url, "--seconds", "\(seconds)"])
    }

    public func status() throws -> ReplicationStatus { try Replication.status(of: container) }
}

/// Sends SIGTERM to each process and waits for it (30 s each); whether all ended before their deadline.
public func stop(_ processes: [BackgroundProcess]) -> Bool {
    for process in processes { process.kill(SIGTERM) }
    for process in processes { _ = process.wait(timeout: 30) }
    return processes.allSatisfy { !$0.timedOut }
}

extension LocalPostgresCluster {
    /// The server's current `notes` of `group`, as `hexkey:hexvalue` in key order.
    public func storedNotes(group: String) throws -> [String] {
        try psql("""
            SELECT encode(key, 'hex') || ':' || encode(value, 'hex') FROM kvsync_state
            WHERE group_id = '\(group)' AND kind = 'collection' AND name = 'notes' AND value IS NOT NULL ORDER BY key
            """).split(separator: "\n").map(String.init)
    }

    public func count(_ sql: String) throws -> Int {
        Int(try psql(sql).trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
    }
}

/// Calls `body` until it returns true or `seconds` pass; whether it did.
public func eventually(_ seconds: Double, every microseconds: UInt32 = 5_000, _ body: () throws -> Bool) rethrows -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if try body() { return true }
        usleep(microseconds)
    }
    return try body()
}
#endif
