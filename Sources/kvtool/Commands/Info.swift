import ArgumentParser
import KVStore

/// `kvtool info`: the container, its environment and its collections.
struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Show the container, the LMDB environment and the collections.")

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let container = try global.openContainer(readOnly: true)
        let env = try container.store.environmentInfo()
        let counted = try container.store.catalogWithCounts()
        let (catalog, counts) = (counted.map(\.entry), counted.map(\.count))
        if global.json {
            Output.json([
                "path": container.path,
                "group": container.groupIdentifier.rawValue,
                "environment": [
                    "mapSize": env.mapSize, "pageSize": env.pageSize, "usedPages": env.usedPages,
                    "lastTransactionID": env.lastTransactionID, "maxReaders": env.maxReaders,
                    "readersUsed": env.readersUsed,
                ],
                "collections": zip(catalog, counts).filter { $0.0.kind == .collection }.map { entry, count in
                    Collections.json(entry, count: count)
                },
                "defaults": zip(catalog, counts).filter { $0.0.kind == .defaults }.map { entry, count in
                    ["name": entry.name, "keys": count] as [String: Any]
                },
            ] as [String: Any])
            return
        }
        print("container  \(container.path)")
        print("map size   \(env.mapSize) bytes, page size \(env.pageSize), \(env.usedPages) pages used")
        print("last txn   \(env.lastTransactionID)")
        print("readers    \(env.readersUsed) used of \(env.maxReaders)")
        print("")
        Collections.printTable(catalog, counts: counts)
    }
}
