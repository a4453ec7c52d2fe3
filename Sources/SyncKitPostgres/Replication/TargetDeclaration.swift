#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

/// A replicated collection or suite, as `_sync.targets` records it.
struct TargetDeclaration: Codable, Hashable, Sendable {
    var kind: String
    var name: String
    var since: Date
}
#endif
