#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

extension Mutation.Target {
    /// `collection` or `defaults`, as the server's rows spell it.
    var kindName: String {
        switch self {
        case .collection: "collection"
        case .defaults: "defaults"
        }
    }

    init?(kindName: String, name: String) {
        switch kindName {
        case "collection": self = .collection(name)
        case "defaults": self = .defaults(name)
        default: return nil
        }
    }

    /// The key of `_sync.targets`, and the suffix of the target's versions collection.
    var declarationKey: String {
        switch self {
        case .collection(let name): "c." + name
        case .defaults(let name): "d." + name
        }
    }
}
#endif
