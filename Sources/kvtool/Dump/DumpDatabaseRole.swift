import Foundation
import KVStore

/// What a named database is, according to a catalog.
enum DumpDatabaseRole: Sendable {
    case collection(CatalogEntry)
    case index(collection: CatalogEntry, index: CatalogEntry.IndexEntry)
    case suite(CatalogEntry)
    /// `_requirements`: observer requirements, keys `c/<name>` or `d/<name>`, values a kind name.
    case requirements

    static let requirementsDatabase = Store.requirementsDatabaseName
    static let catalogDatabase = Catalog.databaseName

    /// Every database a catalog describes, by name.
    static func roles(for catalog: [CatalogEntry]) -> [String: DumpDatabaseRole] {
        var roles: [String: DumpDatabaseRole] = [requirementsDatabase: .requirements]
        for entry in catalog {
            switch entry.kind {
            case .collection:
                roles[entry.database] = .collection(entry)
                for index in entry.indexes { roles[index.database] = .index(collection: entry, index: index) }
            case .defaults:
                roles[entry.database] = .suite(entry)
            }
        }
        return roles
    }

    /// SyncKit's history collections (`_history`, `_history.state`, `_history.consumers`), which
    /// `load` restores only with `--replace`.
    var isHistory: Bool {
        if case .collection(let entry) = self { return DumpCatalog.isHistory(entry.name) }
        return false
    }

    /// A collection KVStore or SyncKit keeps for itself (its name starts with `_`), or one of its indexes.
    var isInternal: Bool {
        switch self {
        case .collection(let entry), .index(collection: let entry, index: _): entry.name.hasPrefix("_")
        case .suite, .requirements: false
        }
    }

    /// The collection or suite a put is recorded as, so that write observers (history) see it; `nil`
    /// for databases whose changes are not mutations of a collection or suite.
    var target: Mutation.Target? {
        switch self {
        case .collection(let entry): DumpCatalog.isHistory(entry.name) ? nil : .collection(entry.name)
        case .suite(let entry): .defaults(entry.name)
        case .index, .requirements: nil
        }
    }

    /// Human words for messages: `collection 'scores'`.
    var what: String {
        switch self {
        case .collection(let entry): "collection '\(entry.name)'"
        case .index(let collection, let index): "index '\(index.name)' of '\(collection.name)'"
        case .suite(let entry): "defaults suite '\(entry.name)'"
        case .requirements: "'_requirements'"
        }
    }

    /// How keys of this database decode: the catalog's encoding; for an index, the index key then
    /// the primary key.
    func keyEncoding() -> KeyEncoding? {
        switch self {
        case .collection(let entry): return KeyEncoding(entry.keyEncoding)
        case .suite: return .string
        case .index(let collection, let index):
            guard let primary = KeyEncoding(collection.keyEncoding), let indexKey = KeyEncoding(index.keyEncoding) else { return nil }
            return .tuple(Self.parts(indexKey) + Self.parts(primary))
        case .requirements: return nil
        }
    }

    static func parts(_ encoding: KeyEncoding) -> [KeyEncoding] {
        if case .tuple(let parts) = encoding { return parts }
        return [encoding]
    }
}
