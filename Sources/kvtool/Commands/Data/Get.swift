import ArgumentParser
import KVStore

/// `kvtool get <collection> <key>`.
struct Get: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Print the value at a key.",
        discussion: "The key is typed as the collection's key encoding: 42, 2026-11-21, a UUID, or a JSON array for tuple keys. Exits 1 if the key has no value.")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: KeyArguments

    func run() throws {
        let (collection, key) = (target.collection, target.key)
        let (entry, raw, keyBytes) = try target.resolve(in: try global.openContainer(readOnly: true), forWriting: false)
        let stored: [UInt8]?
        do {
            stored = try raw.get(keyBytes)
        } catch KVStoreError.corruptValue(_, _, let reason, _) {
            // (A value over the size limit, refused before it is copied: named with the key as typed.)
            throw CLIError(.failure, "corrupt value in '\(collection)' at key \(key): \(reason)")
        }
        guard let value = stored else {
            throw CLIError(.notFound, "no value at key \(key) in '\(collection)'")
        }
        let json = try ValueText.render(value, entry: entry, key: key)
        print(try Output.line(global.json ? ["key": .string(key), "value": json] : json))
    }
}
