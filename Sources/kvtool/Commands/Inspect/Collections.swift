import ArgumentParser
import KVStore

/// `kvtool collections`: the catalog.
struct Collections: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "collections", abstract: "List the collections and defaults suites in the catalog.")

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let container = try global.openContainer(readOnly: true)
        let counted = try container.store.catalogWithCounts()
        let (catalog, counts) = (counted.map(\.entry), counted.map(\.count))
        if global.json {
            try Output.json(.array(zip(catalog, counts).map { try Self.json($0, count: $1) }))
        } else {
            Self.printTable(catalog, counts: counts)
        }
    }

    /// An entry as the dump's header writes it (``CatalogEntry/json``), with its `count`.
    static func json(_ entry: CatalogEntry, count: Int) throws -> JSONValue {
        guard case .object(var members) = try entry.json else { return try entry.json }
        members.append(.init("count", .integer(count)))
        return .object(members)
    }

    static func printTable(_ catalog: [CatalogEntry], counts: [Int]) {
        let rows = zip(catalog, counts).map { entry, count -> [String] in
            var notes: [String] = entry.indexes.map { "index \($0.name)(\($0.keyEncoding))" }
            notes += entry.derived.map { "derives \($0)" }
            if let from = entry.derivedFrom { notes.append(entry.bucketed == true ? "aggregates \(from) by bucket" : "derived from \(from)") }
            return [entry.kind.rawValue, entry.name, String(count), entry.keyEncoding, entry.valueEncoding.description,
                    "v\(entry.schemaVersion)", notes.joined(separator: ", ")]
        }
        Output.table(["KIND", "NAME", "COUNT", "KEY", "VALUE", "SCHEMA", "INDEXES"], rows)
    }
}
