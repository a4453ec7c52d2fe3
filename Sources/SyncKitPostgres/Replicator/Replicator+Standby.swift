#if PostgreSQL
import Foundation
import KVStore
import SyncKit

extension Replicator {
    /// A replicator made as soon as this process can own the container's sync: at once when no other
    /// process does; otherwise this process waits as a standby, and takes over within a few
    /// milliseconds of the owner's exit (or `kill -9`), resuming from the durable consumer position.
    /// A batch the old owner had in flight is sent again and answered "duplicate" (the server keeps one
    /// change per device and token).
    ///
    /// - Parameters:
    ///   - standby: called once, with the owner's record (`nil` if it has not recorded itself yet), when
    ///     this process has to wait.
    /// - Throws: `CancellationError` when the task is cancelled while waiting; otherwise what
    ///   ``init(container:endpoint:targets:options:events:)`` throws.
    public static func whenOwning(container: SharedContainer, endpoint: Endpoint?, targets: [ReplicatedTarget],
                                  options: Options = Options(), standby: @Sendable (SyncOwner?) -> Void = { _ in },
                                  events: @escaping @Sendable (SyncEvent) -> Void = { _ in }) async throws -> Replicator {
        var waiting = false
        // Each try runs on the process's blocking pool: taking the lock may wait out a dying owner's
        // grace (``SyncOwnership``) and writes the owner's record, which may wait for another
        // process's writer lock. Between tries this task is suspended (a timer), holding no thread.
        let service = try await BlockingPool.shared.run { try SyncService(container: container) }
        while true {
            let standing = waiting
            let tried = try await BlockingPool.shared.run { () throws -> Result<Replicator, ReplicationError>? in
                // While the recorded owner lives, its record is all a try costs (no lock, no collection opened).
                guard try !standing || service.liveOwner() == nil else { return nil }
                do {
                    return .success(try Replicator(container: container, endpoint: endpoint, targets: targets,
                                                   options: options, events: events))
                } catch let error as ReplicationError {
                    guard case .ownedElsewhere = error else { throw error }
                    return .failure(error)
                }
            }
            switch tried {
            case .success(let replicator)?:
                return replicator
            case .failure(.ownedElsewhere(let owner, _))?:
                if !waiting {
                    waiting = true
                    standby(owner)
                }
            default:
                break
            }
            try await Task.sleep(for: Self.standbyPoll)
        }
    }

    /// How often a standby tries the lock (the kernel frees it the moment its owner dies).
    static let standbyPoll: Duration = .milliseconds(10)
}
#endif
