#if PostgreSQL
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import HTTPServerKit
import KVStore
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import SyncKitPostgres
import SyncWire

/// The live streams being opened (at most `permits` at once) and those waiting, in order: a waiting
/// one is an entry here, not a task.
final class LiveOpenings: Sendable {
    private let state: Locked<(permits: Int, waiting: CircularBuffer<LiveOpening>, opened: Int)>
    /// Every this many openings, the memory freed is given back (``SyncGateway/returnFreedMemory()``).
    static let trimEvery = 25

    init(permits: Int) { state = Locked((permits, CircularBuffer(), 0)) }

    /// Counts an opening done; true once every ``trimEvery``.
    func counted() -> Bool {
        state.withLock { state in
            state.opened += 1
            return state.opened % Self.trimEvery == 0
        }
    }

    /// Takes a permit for `opening` (true: the caller opens it), or queues it (false).
    func enter(_ opening: LiveOpening) -> Bool {
        state.withLock { state in
            guard state.permits > 0 else {
                state.waiting.append(opening)
                return false
            }
            state.permits -= 1
            return true
        }
    }

    /// The next waiting opening, which takes over the caller's permit; `nil` (the permit returned) if none.
    func leave() -> LiveOpening? {
        state.withLock { state in
            guard let next = state.waiting.popFirst() else {
                state.permits += 1
                return nil
            }
            return next
        }
    }
}
#endif
