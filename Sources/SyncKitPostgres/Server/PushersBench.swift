#if PostgreSQL
import Foundation
import KVStore
import Logging
import PostgresNIO
import SyncWire

/// The server side of `kvtool bench pushers` (issue 51): concurrent pushers on a throwaway server,
/// with `kvsync_push` revision 6 (the wake-up inside the push's transaction) or this library's
/// revision (the pusher sends it after the commit, through ``WakeUps``), and one connection that
/// `LISTEN`s as a gateway's does, counting what it hears. Here rather than in kvtool, which does not
/// depend on PostgresNIO (scripts/check-imports.py).
package final class PushersBench: Sendable {
    /// What one run of pushers did: each push's time (with its wake-up), in milliseconds, sorted.
    package struct Run: Sendable {
        package var pushes: Int
        package var changes: Int
        package var seconds: Double
        package var latencies: [Double]
    }

    private let owner: PostgresConnection
    private let configuration: PostgresConnection.Configuration
    private let logger: Logger
    private let heardCount = Locked(0)
    private let listening = Locked<Task<Void, any Error>?>(nil)

    private init(owner: PostgresConnection, configuration: PostgresConnection.Configuration, logger: Logger) {
        (self.owner, self.configuration, self.logger) = (owner, configuration, logger)
    }

    /// Connects to `url` as its owner, migrates it, and starts the listening connection.
    package static func open(_ url: ServerURL) async throws -> PushersBench {
        let logger = Logger(label: "kvtool.bench.pushers", factory: { _ in SwiftLogNoOpLogHandler() })
        let configuration = try url.connectionConfiguration()
        let owner = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        try await ServerStatements.migrate(owner, logger: logger)
        let bench = PushersBench(owner: owner, configuration: configuration, logger: logger)
        let heard = bench.heardCount
        bench.listening.withLock {
            $0 = Task {
                let listener = try await PostgresConnection.connect(configuration: configuration, id: 2, logger: logger)
                defer { Task { try? await listener.close() } }
                try await listener.listen(on: ServerStatements.channel) { notifications in
                    for try await _ in notifications { heard.withLock { $0 += 1 } }
                }
            }
        }
        return bench
    }

    /// The notifications the listening connection has heard so far.
    package var heard: Int { heardCount.withLock { $0 } }

    /// Installs this library's `kvsync_push` notifying inside its transaction, as up to revision 6
    /// (`wakeInside`), or as it is.
    package func install(wakeInside: Bool) async throws {
        try await ServerStatements.installPush(wakeInside: wakeInside, on: owner, logger: logger)
    }

    /// `count` pushers, each on its own connection, pushing batches of `batch` changes of `value` for
    /// `duration`, to a group each or (`sameGroup`) all to one: with revision 6 installed
    /// (`wakeInside`) the push is all; else each sends its wake-up after the commit.
    package func pushers(_ count: Int, sameGroup: Bool, wakeInside: Bool, batch: Int, value: [UInt8],
                         duration: Duration) async throws -> Run {
        let (configuration, logger) = (configuration, logger)
        let run = UUID().uuidString.prefix(8).lowercased()
        let connections = try await withThrowingTaskGroup(of: PostgresConnection.self) { group in
            for index in 0..<count {
                group.addTask { try await PostgresConnection.connect(configuration: configuration, id: 10 + index, logger: logger) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let start = ContinuousClock.now
        let end = start + duration
        let results = try await withThrowingTaskGroup(of: (Int, [Double]).self) { tasks in
            for (index, connection) in connections.enumerated() {
                tasks.addTask {
                    let statements = ServerStatements(connection: connection, logger: logger, maxValueBytes: 1 << 20)
                    let wakeUps = WakeUps { group in try? await statements.wake(group: group) }
                    let (group, device) = (sameGroup ? "bench.pushers.\(run)" : "bench.pushers.\(run).\(index)", "pusher-\(index)")
                    var (pushes, token, latencies) = (0, UInt64(0), [Double]())
                    while ContinuousClock.now < end {
                        let clock = UInt64(Date().timeIntervalSince1970 * 1000) << 16
                        let changes = (0..<batch).map { _ in
                            token += 1
                            return OutgoingChange(kind: "collection", name: "bench", key: Array("\(device)-\(token)".utf8),
                                                  value: value, clock: clock, base: 0, token: token)
                        }
                        let began = ContinuousClock.now
                        _ = try await statements.push(group: group, device: device, changes: changes, maxClockSkew: .seconds(60))
                        if !wakeInside { await wakeUps.wake(group) }
                        let took = ContinuousClock.now - began
                        latencies.append(Double(took.components.attoseconds) / 1e15 + Double(took.components.seconds) * 1000)
                        pushes += 1
                    }
                    await wakeUps.flush()
                    return (pushes, latencies)
                }
            }
            return try await tasks.reduce(into: [(Int, [Double])]()) { $0.append($1) }
        }
        let elapsed = ContinuousClock.now - start
        for connection in connections { try? await connection.close() }
        let pushes = results.reduce(0) { $0 + $1.0 }
        return Run(pushes: pushes, changes: pushes * batch,
                   seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18,
                   latencies: results.flatMap(\.1).sorted())
    }

    /// Puts this library's revision back, stops listening and closes the owner's connection.
    package func close() async {
        try? await install(wakeInside: false)
        listening.withLock { $0?.cancel() }
        try? await owner.close()
    }
}
#endif
