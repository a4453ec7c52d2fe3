#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
            guard let newBase = newBytes.baseAddress else { return nil }
            // The same bytes: nothing the new value lacks.
            if newBytes.count == old.count, memcmp(newBase, old.baseAddress!, old.count) == 0 { return nil }
            let newReader = CBORReader(base: newBase, end: newBytes.count)
            // The common case, without checking or indexing anything: every top-level key of `old`
            // is one of `new`'s (measured: 19k instructions of a DailyRecord's save went to the
            // general path below, most of them to checking `old` and indexing both maps).
            if let oldBase = old.baseAddress,
               Self.keys(of: CBORReader(base: oldBase, end: old.count), areAllIn: newReader) == true { return nil }
            do {
                // `new` is what CBOREncoder just wrote: read as it is. `old` may be anyone's: checked
                // for well-formedness and limits first, its text as the decoder checks it, when read
                // (measured: checking both, text included, was 100k instructions of a DailyRecord's save).
                let oldReader = try CBORReader.validated(old, limits: limits, checkingText: false)
                let newMap = try CBORMapIndex(reader: newReader, at: 0)
                let oldMap = try CBORMapIndex(reader: oldReader, at: 0)
                guard oldMap.hasKey(notIn: newMap) else { return nil }   // the common case ends here
                let newKeys = Set(newMap.keys)
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

    /// The top-level keys of the map `bytes` that a `T` does not ask for while decoding it (what
    /// ``merge(_:new:old:limits:)`` would keep as unknown), in the map's order; none when `bytes` is not a
    /// map. Throws what decoding `bytes` as a `T` throws. For `kvtool put --merge`, which refuses a
    /// member the app's type does not have (a misspelt one would be stored and never read).
    package static func unknownKeys<T: Decodable>(_ type: T.Type, in bytes: [UInt8], limits: CBORLimits = .default) throws -> [String] {
        guard let first = bytes.first, first >> 5 == 5 else { return [] }
        return try bytes.withUnsafeBytes { raw -> [String] in
            let reader = try CBORReader.validated(raw, limits: limits, checkingText: true)
            let options = CBORDecodingOptions(userInfo: [:])
            options.recordsTopLevelKeys = true
            _ = try options.decode(T.self, reader, at: 0, path: .root, needsEnd: false)
            guard let recorded = options.topLevelMap, let requested = recorded.requested else { return [] }
            return recorded.entryOffsets.enumerated().filter { !requested[$0.offset] }.map(\.element.key)
        }
    }

    /// Whether every top-level key of the map `old` (any bytes: every read is bounds-checked, and
    /// nothing recurses) is a key of the map `new`; `nil` when either holds something this quick scan
    /// does not read (an indefinite length anywhere, a key that is not definite text), which the
    /// general path then settles.
    static func keys(of old: CBORReader, areAllIn new: CBORReader) -> Bool? {
        do throws(CBORError) {
            let (oldCount, oldStart) = try definiteMap(old)
            let (newCount, newStart) = try definiteMap(new)
            // Each map is walked once: the new one's keys first, then the old one's, each looked up.
            var newKeys: [Range<Int>] = []
            newKeys.reserveCapacity(Int(newCount))
            var q = newStart
            for index in 0 ..< newCount {
                let (key, value) = try textKey(new, at: q)
                newKeys.append(key)
                if index + 1 < newCount { q = try skipDefinite(new, value) }
            }
            var p = oldStart
            for index in 0 ..< oldCount {
                let (key, value) = try textKey(old, at: p)
                let found = newKeys.contains { candidate in
                    candidate.count == key.count && memcmp(new.base + candidate.lowerBound, old.base + key.lowerBound, key.count) == 0
                }
                if !found { return false }
                if index + 1 < oldCount { p = try skipDefinite(old, value) }
            }
            return true
        } catch {
            return nil
        }
    }

    private static func definiteMap(_ reader: CBORReader) throws(CBORError) -> (count: UInt64, start: Int) {
        let h = try reader.head(at: 0)
        guard h.major == 5, !h.isIndefinite, h.argument <= UInt64(reader.end) else {
            throw CBORError(.malformed, "not a definite map", offset: 0)
        }
        return (h.argument, h.next)
    }

    /// The byte range of the definite text key at `p`, and where its value starts.
    private static func textKey(_ reader: CBORReader, at p: Int) throws(CBORError) -> (key: Range<Int>, value: Int) {
        let h = try reader.head(at: p)
        guard h.major == 3, !h.isIndefinite else { throw CBORError(.malformed, "not a definite text key", offset: p) }
        let count = try reader.length(h, at: p)
        return (h.next ..< h.next + count, h.next + count)
    }

    /// The offset after the item at `p`, for items of definite length only (no recursion).
    private static func skipDefinite(_ reader: CBORReader, _ p: Int) throws(CBORError) -> Int {
        var q = p
        var pending = 1
        while pending > 0 {
            let h = try reader.head(at: q)
            pending -= 1
            guard !h.isIndefinite else { throw CBORError(.malformed, "indefinite length", offset: q) }
            switch h.major {
            case 0, 1, 7:
                q = h.next
            case 2, 3:
                q = h.next + (try reader.length(h, at: q))
            case 4, 5:
                let room = reader.end - h.next - pending
                let items = h.major == 5 ? 2 : 1
                guard h.argument <= UInt64(max(room, 0)), Int(h.argument) * items <= room else {
                    throw CBORError(.truncated, "container longer than the input", offset: q)
                }
                pending += Int(h.argument) * items
                q = h.next
            default:   // 6: a tag, then its item
                pending += 1
                q = h.next
            }
        }
        return q
    }

    /// An entry's encoded key and its whole encoding (key and value).
    private static func raw(_ entry: (key: String, start: Int, value: Int), _ reader: CBORReader,
                            _ bytes: UnsafeRawBufferPointer) throws(CBORError) -> (key: UnsafeRawBufferPointer, entry: UnsafeRawBufferPointer) {
        let end = try reader.skip(entry.value)
        return (UnsafeRawBufferPointer(rebasing: bytes[entry.start ..< entry.value]),
                UnsafeRawBufferPointer(rebasing: bytes[entry.start ..< end]))
    }
}
