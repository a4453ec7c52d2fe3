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
            try Output.json(.array(zip(catalog, counts).map { Self.json($0, count: $1) }))
        } else {
            Self.printTable(catalog, counts: counts)
        }
    }

    static func json(_ entry: CatalogEntry, count: Int) -> JSONValue {
        var members: [JSONValue.Member] = [
            .init("name", .string(entry.name)), .init("kind", .string(entry.kind.rawValue)), .init("count", .integer(count)),
            .init("keyEncoding", .string(entry.keyEncoding)), .init("valueEncoding", .string(entry.valueEncoding.description)),
            .init("schemaVersion", .integer(entry.schemaVersion)), .init("database", .string(entry.database)),
            .init("indexes", .array(entry.indexes.map { ["name": .string($0.name), "keyEncoding": .string($0.keyEncoding)] })),
            .init("derived", .array(entry.derived.map(JSONValue.string))),
        ]
        if let from = entry.derivedFrom { members.append(.init("derivedFrom", .string(from))) }
        if entry.bucketed == true { members.append(.init("bucketed", true)) }
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
