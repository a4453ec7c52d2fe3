import ArgumentParser
import KVStore

/// The collection and key that `get`, `put` and `delete` name, and what they resolve to.
struct KeyArguments: ParsableArguments {
    @Argument(help: "The collection.") var collection: String
    @Argument(help: "The key.") var key: String

    /// The collection's catalog entry, the collection as bytes, and the key's bytes. For a write, a
    /// collection kvtool cannot write (values that are not CBOR, or data only the app maintains) is
    /// refused before the key is parsed.
    func resolve(in container: SharedContainer, forWriting: Bool) throws -> (entry: CatalogEntry, raw: KVCollection<ByteKey, [UInt8]>, key: ByteKey) {
        let (entry, raw) = try container.store.untypedCollection(named: collection)
        if forWriting { try ValueText.requireWritable(entry) }
        return (entry, raw, ByteKey(try ValueText.parseKey(key, entry: entry)))
    }
}
