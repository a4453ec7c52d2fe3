#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

extension Mutation.Target {
    /// `collection` or `defaults`, as the server's rows spell it: the catalog's kind.
    var kindName: String { kind.rawValue }

    /// The target a server row names; `nil` for a kind the catalog does not have.
    init?(kindName: String, name: String) {
        guard let kind = CatalogEntry.Kind(rawValue: kindName) else { return nil }
        self.init(kind: kind, name: name)
    }

    /// The key of `_sync.targets` (SyncKit's, which counts what is pending from it), and the suffix of
    /// the target's versions collection.
    var declarationKey: String { syncDeclarationKey }
}
#endif
