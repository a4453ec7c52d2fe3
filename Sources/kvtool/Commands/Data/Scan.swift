import ArgumentParser
import KVStore

/// `kvtool scan <collection>`.
struct Scan: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Print entries in key order: all of them, a range, or a prefix.",
        discussion: "Keys are typed as for get. --prefix takes the first component of a tuple key, or the start of a string key.")

    @OptionGroup var global: GlobalOptions
    @Argument(help: "The collection.") var collection: String
    @Option(help: "The first key (inclusive).") var from: String?
    @Option(help: "The last key (inclusive).") var through: String?
    @Option(help: "Only keys that start with this (first tuple component or string prefix).") var prefix: String?
    @Flag(help: "Newest (largest key) first.") var reverse = false
    @Option(parsing: .unconditional, help: "At most this many entries.") var limit: Int?

    func validate() throws {
        if prefix != nil && (from != nil || through != nil) {
            throw ValidationError("--prefix cannot be combined with --from or --through")
        }
        if let limit, limit < 0 { throw ValidationError("--limit must not be negative") }
    }

    func run() throws {
        let container = try global.openContainer(readOnly: true)
        let (entry, raw) = try container.store.untypedCollection(named: collection)
        let range: KeyRange<ByteKey>
        if let prefix {
            let bytes = try ValueText.parsePrefix(prefix, entry: entry)
            range = KeyRange(lower: .inclusive(ByteKey(bytes)), upper: ByteRangeHelper.prefixUpper(bytes))
        } else {
            range = KeyRange(
                lower: try from.map { .inclusive(ByteKey(try ValueText.parseKey($0, entry: entry))) } ?? .unbounded,
                upper: try through.map { .inclusive(ByteKey(try ValueText.parseKey($0, entry: entry))) } ?? .unbounded)
        }
        let entries: [(key: ByteKey, value: [UInt8])]
        do {
            entries = try raw.entries(range, reverse: reverse, limit: limit)
        } catch KVStoreError.corruptValue(_, let hexKey, let reason, _) {
            // (A value over the size limit, refused before it is copied: named with the key rendered.)
            let keyText = Hex.decode(hexKey.utf8).flatMap { try? ValueText.renderKey($0, entry: entry) } ?? "0x" + hexKey
            throw CLIError(.failure, "corrupt value in '\(collection)' at key \(keyText): \(reason)")
        }
        let rendered = try entries.map { key, value -> (bytes: [UInt8], text: String, value: JSONValue) in
            let keyText = try ValueText.renderKey(key.bytes, entry: entry)
            return (key.bytes, keyText, try ValueText.render(value, entry: entry, key: keyText))
        }
        if global.json {
            print(try Output.line(.array(try rendered.map { ["key": try ValueText.keyJSON($0.bytes, entry: entry), "value": $0.value] })))
        } else {
            for (_, key, value) in rendered { print("\(key)\t\(try Output.line(value))") }
        }
    }
}

enum ByteRangeHelper {
    /// The exclusive upper bound of every key starting with `prefix`.
    static func prefixUpper(_ prefix: [UInt8]) -> KeyRange<ByteKey>.Bound {
        var bytes = prefix
        while let last = bytes.last {
            if last < 0xFF {
                bytes[bytes.count - 1] = last + 1
                return .exclusive(ByteKey(bytes))
            }
            bytes.removeLast()
        }
        return .unbounded
    }
}
