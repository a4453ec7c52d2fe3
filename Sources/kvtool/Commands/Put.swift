import ArgumentParser
import KVStore

/// `kvtool put <collection> <key> <json>`.
struct Put: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "put",
        abstract: "Store a JSON value (as CBOR) at a key.",
        discussion: "Pass - as the value to read it from standard input. Collections with indexes or derived collections are written only by the app, which maintains them.")

    @OptionGroup var global: GlobalOptions
    @OptionGroup var target: KeyArguments
    @Argument(help: "The value as JSON, or - for standard input.") var value: String

    func run() throws {
        let container = try global.openContainer(readOnly: false)
        let (_, raw, keyBytes) = try target.resolve(in: container, forWriting: true)
        let encoded = try JSONBridge.cbor(fromJSON: try Output.readArgument(value)).encoded()
        try container.store.write(author: global.author) { tx in
            try raw.put(encoded, forKey: keyBytes, in: tx)
        }
        if global.json { try Output.json(["stored": true]) }
    }
}
