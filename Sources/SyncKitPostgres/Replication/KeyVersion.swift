#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

/// What a replicator knows of one key: the server version it last saw (the base of its next change).
struct KeyVersion: Codable, Hashable, Sendable {
    var version: Int64
    var clock: UInt64
    var device: String
}
#endif
