import ArgumentParser
import KVStore

/// `kvtool delete <collection> <key>`.
struct Delete: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "delete", abstract: "Delete the value at a key. Exits 1 if there was none.")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: KeyArguments
    @Flag(help: "Delete from an internal collection (_…). History, its consumers or sync may then miss an entry for good.")
    var force = false

    func run() throws {
        try ValueText.requireNotInternal(target.collection, force: force, verb: "delete")
        let container = try global.openContainer(readOnly: false)
        let (_, raw, keyBytes) = try target.resolve(in: container, forWriting: true)
        let existed = try container.store.write(author: global.author) { tx in
            try raw.delete(keyBytes, in: tx)
        }
        guard existed else { throw CLIError(.notFound, "no value at key \(target.key) in '\(target.collection)'") }
        if global.json { try Output.json(["collection": .string(target.collection), "key": .string(target.key), "deleted": true]) }
    }
}
