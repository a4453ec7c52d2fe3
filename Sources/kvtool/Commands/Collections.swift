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
            Output.json(zip(catalog, counts).map { Self.json($0, count: $1) })
        } else {
            Self.printTable(catalog, counts: counts)
        }
    }

    static func json(_ entry: CatalogEntry, count: Int) -> [String: Any] {
        var object: [String: Any] = [
            "name": entry.name, "kind": entry.kind.rawValue, "count": count,
            "keyEncoding": entry.keyEncoding, "valueEncoding": entry.valueEncoding.description,
            "schemaVersion": entry.schemaVersion, "database": entry.database,
            "indexes": entry.indexes.map { ["name": $0.name, "keyEncoding": $0.keyEncoding] },
            "derived": entry.derived,
        ]
        if let from = entry.derivedFrom { object["derivedFrom"] = from }
        if entry.bucketed == true { object["bucketed"] = true }
        return object
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
