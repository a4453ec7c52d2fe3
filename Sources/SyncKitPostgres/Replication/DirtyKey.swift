#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

/// A key whose current value must reach the server although no pending history entry says so: the
/// result of a merge, or a local value that won a conflict.
struct DirtyKey: Codable, Hashable, Sendable {
    var kind: String
    var name: String
    var key: [UInt8]
    var clock: UInt64
    var token: UInt64
    /// True when the key was queued by a resync or after history was purged (its clock is the
    /// requeue's, not a write's): the server keeps its own equal value then, rather than take the
    /// same value again. Absent (nil) in keys queued by a write, and in state written before.
    var requeued: Bool? = nil
}
#endif
