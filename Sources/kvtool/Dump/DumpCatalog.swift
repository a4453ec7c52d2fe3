import Foundation
import KVStore

/// Checks on catalog entries: well-formed, not repeated, consistent with a target's.
enum DumpCatalog {
    /// SyncKit's history collections (`History` keeps its entries, state and consumers in them):
    /// `History.collectionNames`, spelled out because the dump parser is also compiled without SyncKit
    /// (scripts/fuzz.sh). A test checks that the two agree.
    static let historyCollections: Set<String> = ["_history", "_history.state", "_history.consumers"]

    static func isHistory(_ name: String) -> Bool { historyCollections.contains(name) }

    /// Collection, index and suite names, as the library checks them.
    static func isValidName(_ name: String) -> Bool { CatalogEntry.isValidName(name) }

    /// Whether a dump may carry values of `encoding`: the library's own codecs (a fixed layout no
    /// larger than a dump line), never another codec's, whose values nothing here could check.
    static func isLoadable(_ encoding: ValueEncoding) -> Bool {
        switch encoding {
        case .cbor, .bytes: true
        case .fixed(let size): size <= DumpLimits.defaultMaxLineBytes
        case .other: false
        }
    }

    /// Throws if `entry` is not a catalog entry the library could have written.
    static func checkWellFormed(_ entry: CatalogEntry, line: Int) throws {
        let what = "\(entry.kind == .defaults ? "defaults suite" : "collection") '\(entry.name)'"
        func fail(_ problem: String) -> CLIError { DumpError.at(line, "bad catalog entry for \(what): \(problem)") }
        guard isValidName(entry.name) else {
            throw DumpError.at(line, "bad catalog entry: \(JSONText.quoted(entry.name)) is not a valid name (1 to 200 ASCII letters, digits, '.', '_' or '-')")
        }
        guard let keyEncoding = KeyEncoding(entry.keyEncoding), keyEncoding.description == entry.keyEncoding else {
            throw fail("unknown key encoding \(JSONText.quoted(entry.keyEncoding))")
        }
        guard isLoadable(entry.valueEncoding) else { throw fail("unknown value encoding \(JSONText.quoted(entry.valueEncoding.description))") }
        guard entry.schemaVersion >= 1 else { throw fail("schema version \(entry.schemaVersion) is below 1") }
        switch entry.kind {
        case .collection:
            guard entry.database == Catalog.collectionDatabase(entry.name) else { throw fail("its database is \(JSONText.quoted(entry.database)), not \"\(Catalog.collectionDatabase(entry.name))\"") }
        case .defaults:
            guard entry.database == Catalog.defaultsDatabase(entry.name) else { throw fail("its database is \(JSONText.quoted(entry.database)), not \"\(Catalog.defaultsDatabase(entry.name))\"") }
            guard keyEncoding == .string, entry.valueEncoding == .cbor, entry.indexes.isEmpty, entry.derived.isEmpty,
                  entry.derivedFrom == nil else {
                throw fail("a defaults suite has string keys, cbor values and no indexes or derived collections")
            }
        }
        var indexNames = Set<String>()
        for index in entry.indexes {
            guard isValidName(index.name) else { throw fail("index name \(JSONText.quoted(index.name)) is not valid") }
            guard indexNames.insert(index.name).inserted else { throw fail("index '\(index.name)' is listed twice") }
            guard let encoding = KeyEncoding(index.keyEncoding), encoding.description == index.keyEncoding else {
                throw fail("index '\(index.name)' has an unknown key encoding \(JSONText.quoted(index.keyEncoding))")
            }
            guard index.database == Catalog.indexDatabase(entry.name, index.name) else {
                throw fail("index '\(index.name)' has the database \(JSONText.quoted(index.database)), not \"\(Catalog.indexDatabase(entry.name, index.name))\"")
            }
        }
        for name in entry.derived + (entry.derivedFrom.map { [$0] } ?? []) where !isValidName(name) {
            throw fail("derived collection name \(JSONText.quoted(name)) is not valid")
        }
        if entry.bucketed != nil && (entry.bucketed != true || entry.derivedFrom == nil) {
            throw fail("\"bucketed\" is only ever true, on a collection derived from another")
        }
    }

    /// Throws if two entries describe the same collection or suite.
    static func checkUnique(_ catalog: [CatalogEntry], lines: [Int]) throws {
        var seen: [String: CatalogEntry] = [:]
        for (i, entry) in catalog.enumerated() {
            let key = entry.kind.rawValue + "/" + entry.name
            let line = i < lines.count ? lines[i] : 1
            let what = "\(entry.kind == .defaults ? "defaults suite" : "collection") '\(entry.name)'"
            if let earlier = seen[key] {
                throw DumpError.at(line, earlier == entry ? "duplicate catalog entry for \(what)"
                                                          : "contradicting catalog entries for \(what)")
            }
            seen[key] = entry
        }
    }

    /// Throws if an entry of `catalog` describes a collection or suite of `target` differently
    /// (keys, values, schema version or indexes): merging would mix two layouts in one database.
    static func checkConsistent(_ catalog: [CatalogEntry], lines: [Int], with target: [CatalogEntry]) throws {
        let existing = Dictionary(target.map { ($0.kind.rawValue + "/" + $0.name, $0) }, uniquingKeysWith: { first, _ in first })
        for (i, entry) in catalog.enumerated() {
            guard let current = existing[entry.kind.rawValue + "/" + entry.name] else { continue }
            let line = i < lines.count ? lines[i] : 1
            let what = "\(entry.kind == .defaults ? "defaults suite" : "collection") '\(entry.name)'"
            var detail: String?
            if current.keyEncoding != entry.keyEncoding {
                detail = "keys are \(entry.keyEncoding) in the dump, \(current.keyEncoding) in the target"
            } else if current.valueEncoding != entry.valueEncoding {
                detail = "values are \(entry.valueEncoding) in the dump, \(current.valueEncoding) in the target"
            } else if current.schemaVersion != entry.schemaVersion {
                detail = "schema version \(entry.schemaVersion) in the dump, \(current.schemaVersion) in the target"
            } else if Set(current.indexes) != Set(entry.indexes) {
                let describe = { (indexes: [CatalogEntry.IndexEntry]) in
                    indexes.isEmpty ? "none" : indexes.map { "\($0.name)(\($0.keyEncoding))" }.sorted().joined(separator: ", ")
                }
                detail = "indexes are \(describe(entry.indexes)) in the dump, \(describe(current.indexes)) in the target"
            }
            if let detail {
                throw DumpError.at(line, "catalog mismatch for \(what): \(detail); use --replace to load over it")
            }
        }
    }
}
