import ArgumentParser
import KVStore

/// `kvtool delete <collection> <key>`.
struct Delete: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete the value at a key. Exits 1 if there was none.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The collection.") var collection: String
    @Argument(help: "The key.") var key: String

    func run() throws {
        let container = try global.openContainer(readOnly: false)
        let (entry, raw) = try container.store.untypedCollection(named: collection)
        try ValueText.requireWritable(entry)
        let keyBytes = try ValueText.parseKey(key, entry: entry)
        let existed = try container.store.write(author: global.author) { tx in
            try raw.delete(ByteKey(keyBytes), in: tx)
        }
        guard existed else { throw CLIError(.notFound, "no value at key \(key) in '\(collection)'") }
        if global.json { try Output.json(["deleted": true]) }
    }
}
