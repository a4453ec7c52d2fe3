/// Keeps the fields that an older version of a type does not know, as protocol buffers keep unknown
/// fields and CloudKit saves only the fields a client changed: when a value stored as a CBOR map is
/// replaced by a typed write, the map entries whose keys the type does not read survive.
///
/// A key counts as known when the type's `init(from:)` asks for it (`decode`, `decodeIfPresent`,
/// `contains`, a nested container) while decoding the value being replaced; a type that lists
/// `allKeys` knows them all. So an optional property the new value leaves out (`nil`) is deleted, as
/// the app meant, and only keys the type never asks for are kept. Only the top-level map is merged:
/// a nested struct that gained fields is replaced whole (see the DocC article *Sharing a store*).
package enum CBORUnknownFields {
    /// `new` (a map that a `T` encoded) with the entries of `old`'s top-level map that `T` does not
    /// read and `new` does not have, in RFC 8949's deterministic key order, as ``CBOREncoder`` writes
    /// maps. `nil` when there is nothing to keep: either is not a map, `old` has no key that `new`
    /// lacks, `old` is not well-formed, `T` cannot decode `old`, or the result would break `limits`.
    ///
    /// Costs a scan of both maps' keys; only when `old` has keys that `new` lacks, a decode of `old`
    /// as well.
    package static func merge<T: Decodable>(_ type: T.Type, new: [UInt8], old: UnsafeRawBufferPointer,
                                            limits: CBORLimits) -> [UInt8]? {
        guard let first = new.first, first >> 5 == 5, let oldFirst = old.first, oldFirst >> 5 == 5 else { return nil }
        return new.withUnsafeBytes { newBytes -> [UInt8]? in
            do {
                let newReader = try CBORReader.validated(newBytes, limits: limits)
                let oldReader = try CBORReader.validated(old, limits: limits)
                let newMap = try CBORMapIndex(reader: newReader, at: 0)
                let newKeys = Set(newMap.keys)
                let oldMap = try CBORMapIndex(reader: oldReader, at: 0)
                guard oldMap.keys.contains(where: { !newKeys.contains($0) }) else { return nil }
                // Which keys of the old map the type asks for.
                let options = CBORDecodingOptions(userInfo: [:])
                options.recordsTopLevelKeys = true
                _ = try options.decode(T.self, oldReader, at: 0, path: .root, needsEnd: false)
                guard let recorded = options.topLevelMap, let requested = recorded.requested else { return nil }
                var kept: [(key: UnsafeRawBufferPointer, entry: UnsafeRawBufferPointer)] = []
                for (index, entry) in recorded.entryOffsets.enumerated() where !requested[index] && !newKeys.contains(entry.key) {
                    kept.append(try raw(entry, oldReader, old))
                }
                guard !kept.isEmpty else { return nil }
                var all = kept
                for entry in newMap.entryOffsets { all.append(try raw(entry, newReader, newBytes)) }
                all.sort { $0.key.lexicographicallyPrecedes($1.key) }
                let size = CBORWriter.headSize(UInt64(all.count)) + all.reduce(0) { $0 + $1.entry.count }
                guard size <= limits.maxInputSize else { return nil }
                return CBORWriter.serialize(size: size) { writer in
                    writer.head(5, UInt64(all.count))
                    for item in all { writer.raw(item.entry) }
                }
            } catch {
                return nil
            }
        }
    }

    /// An entry's encoded key and its whole encoding (key and value).
    private static func raw(_ entry: (key: String, start: Int, value: Int), _ reader: CBORReader,
                            _ bytes: UnsafeRawBufferPointer) throws(CBORError) -> (key: UnsafeRawBufferPointer, entry: UnsafeRawBufferPointer) {
        let end = try reader.skip(entry.value)
        return (UnsafeRawBufferPointer(rebasing: bytes[entry.start ..< entry.value]),
                UnsafeRawBufferPointer(rebasing: bytes[entry.start ..< end]))
    }
}
