// `[String: V]` straight to and from CBOR maps, without the standard library's generic
// `Dictionary.init(from:)` and `encode(to:)`: those make a coding key and a String for every key, cast
// each one dynamically, send every value through a type-erased container and never reserve capacity.

// MARK: - Decoding

/// A dictionary whose keys are strings: decoded from a map in one pass.
protocol CBORDecodableStringMap {
    static func decodeCBORMap(_ options: CBORDecodingOptions, _ reader: CBORReader, at p: Int,
                              path: CBORCodingPath) throws -> (value: Self, next: Int)?
}

extension Dictionary: CBORDecodableStringMap where Key == String, Value: Decodable {
    static func decodeCBORMap(_ options: CBORDecodingOptions, _ reader: CBORReader, at p: Int,
                              path: CBORCodingPath) throws -> (value: Self, next: Int)? {
        try options.decodeStringMap(reader, at: p, path: path) { q, key in
            try options.decode(Value.self, reader, at: q, path: path.appending(CBORStringKey(stringValue: key)), needsEnd: true)
        }
    }
}

extension CBORDecodingOptions {
    /// Decodes the map at `p` into a dictionary, reading each value with `value(offset, key)`.
    /// Returns nil, having decoded nothing for good, when a key is not a definite-length text string
    /// (integer keys, chunked text): the general keyed container handles those.
    @inline(__always)
    func decodeStringMap<V>(_ reader: CBORReader, at p: Int, path: @autoclosure () -> CBORCodingPath,
                            _ value: (Int, String) throws -> (value: V, next: Int)) throws -> (value: [String: V], next: Int)? {
        func checked<R>(_ body: () throws(CBORError) -> R) throws -> R {
            do { return try body() } catch { throw error.decodingError([String: V].self, path().keys) }
        }
        let (h, q0) = try checked { () throws(CBORError) in try reader.untagged(at: p) }
        guard h.major == 5 else { return try checked { () throws(CBORError) in throw reader.mismatch("a map (keyed container)", h, at: q0) } }
        var result: [String: V] = [:]
        var q = h.next
        var remaining = h.argument
        if !h.isIndefinite { result.reserveCapacity(Int(min(remaining, UInt64(reader.end - q) / 2))) }
        while h.isIndefinite ? q < reader.end && reader.byte(q) != 0xFF : remaining > 0 {
            let (kh, count) = try checked { () throws(CBORError) in
                let kh = try reader.head(at: q)
                return (kh, kh.major == 3 && !kh.isIndefinite ? try reader.length(kh, at: q) : -1)
            }
            guard count >= 0 else { return nil }
            let key = try checked { () throws(CBORError) in try reader.text(from: kh.next, count: count) }
            let item: (value: V, next: Int)
            do {
                item = try value(kh.next + count, key)
            } catch let error as CBORError {
                throw error.decodingError(V.self, path().appending(CBORStringKey(stringValue: key)).keys)
            }
            if result.updateValue(item.value, forKey: key) != nil {
                let offset = q
                return try checked { () throws(CBORError) in
                    throw CBORError(.duplicateKey, "map has the key \"\(key.prefix(64))\" twice", offset: offset)
                }
            }
            q = item.next
            remaining &-= 1
        }
        if h.isIndefinite {
            let end = q
            try checked { () throws(CBORError) in
                guard end < reader.end else { throw CBORError(.truncated, "indefinite-length map has no break (0xFF)", offset: end) }
            }
            q += 1
        }
        return (result, q)
    }
}

// MARK: - Encoding

/// Swift's dictionaries: their iteration order is random per process, so the encoder sorts them.
protocol UnorderedCBORMap {
    /// The map of a dictionary whose keys are strings, in RFC 8949's deterministic order; nil for other
    /// key types, which go through `encode(to:)` and are sorted after.
    func cborStringKeyedNode(_ options: CBOREncodingOptions, path: CBORCodingPath) throws -> CBOREncodingNode?
}

extension Dictionary: UnorderedCBORMap where Key: Encodable, Value: Encodable {
    func cborStringKeyedNode(_ options: CBOREncodingOptions, path: CBORCodingPath) throws -> CBOREncodingNode? {
        guard Key.self == String.self else { return nil }
        var keys: [String] = []
        var values: [CBOREncodingNode] = []
        keys.reserveCapacity(count)
        values.reserveCapacity(count)
        for (key, value) in self {
            let key = unsafeBitCast(key, to: String.self)
            keys.append(key)
            values.append(try options.node(for: value, at: path.appending(CBORStringKey(stringValue: key))))
        }
        return .map(CBORMapBox(sorting: keys, values))
    }
}

extension CBOREncodingOptions {
    /// The sorted map of a dictionary of scalars, each value made by `value`.
    @inline(__always)
    static func stringMap<V>(_ dictionary: [String: V], _ value: (V) -> CBORValue) -> CBOREncodingNode {
        var keys: [String] = []
        var values: [CBOREncodingNode] = []
        keys.reserveCapacity(dictionary.count)
        values.reserveCapacity(dictionary.count)
        for (k, v) in dictionary {
            keys.append(k)
            values.append(.value(value(v)))
        }
        return .map(CBORMapBox(sorting: keys, values))
    }
}

/// RFC 8949 section 4.2.1's order of text keys (shorter first, then bytewise), compared through the
/// first 16 bytes held as two integers, so that most comparisons never touch the strings.
struct CBORKeyOrder {
    private struct SortKey {
        var count: Int
        var high: UInt64
        var low: UInt64
        var index: Int
    }

    /// `keys` and `values` (paired by position) in the keys' sorted order.
    static func sorted(_ keys: [String], _ values: [CBOREncodingNode]) -> (keys: [String], values: [CBOREncodingNode]) {
        let order = sortKeys(keys)
        var sortedKeys: [String] = []
        var sortedValues: [CBOREncodingNode] = []
        sortedKeys.reserveCapacity(order.count)
        sortedValues.reserveCapacity(order.count)
        for entry in order {
            sortedKeys.append(keys[entry.index])
            sortedValues.append(values[entry.index])
        }
        return (sortedKeys, sortedValues)
    }

    private static func sortKeys(_ keys: [String]) -> [SortKey] {
        var sortKeys: [SortKey] = []
        sortKeys.reserveCapacity(keys.count)
        for i in keys.indices {
            var key = keys[i]
            key.withUTF8 { utf8 in
                let raw = UnsafeRawBufferPointer(utf8)
                sortKeys.append(SortKey(count: utf8.count, high: bigEndianPrefix(raw, from: 0), low: bigEndianPrefix(raw, from: 8), index: i))
            }
        }
        sortKeys.sort { a, b in
            if a.count != b.count { return a.count < b.count }
            if a.high != b.high { return a.high < b.high }
            if a.low != b.low { return a.low < b.low }
            return a.count > 16 && keys[a.index].utf8.dropFirst(16).lexicographicallyPrecedes(keys[b.index].utf8.dropFirst(16))
        }
        return sortKeys
    }

    /// Up to 8 bytes of `bytes` from `start` as a big-endian integer, zero-padded on the right: such
    /// integers compare as the bytes do. Eight bytes are loaded at once.
    @inline(__always)
    private static func bigEndianPrefix(_ bytes: UnsafeRawBufferPointer, from start: Int) -> UInt64 {
        let n = min(max(bytes.count - start, 0), 8)
        if n == 8 { return UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: start, as: UInt64.self)) }
        var word: UInt64 = 0
        for j in 0 ..< n { word |= UInt64(bytes[start + j]) << (56 - 8 * j) }
        return word
    }
}

/// The metatypes of the generic standard types the codec reads and writes directly, looked up once:
/// in generic code, `T.self == [Int].self` asks the runtime's metadata cache for `[Int]` every time.
enum CBORKnownTypes {
    static let intArray = ObjectIdentifier([Int].self)
    static let doubleArray = ObjectIdentifier([Double].self)
    static let stringArray = ObjectIdentifier([String].self)
    static let byteArray = ObjectIdentifier([UInt8].self)
    static let int64Array = ObjectIdentifier([Int64].self)
    static let stringIntMap = ObjectIdentifier([String: Int].self)
    static let stringStringMap = ObjectIdentifier([String: String].self)
    static let stringDoubleMap = ObjectIdentifier([String: Double].self)
    static let stringBoolMap = ObjectIdentifier([String: Bool].self)

    /// The nominal type descriptor that every `Dictionary<Key, Value>` shares.
    static let dictionaryDescriptor = nominalDescriptor(of: [String: Int].self)

    /// Whether `type` is a `Dictionary` of some key and value types: a struct's metadata (kind 0x200)
    /// whose nominal type descriptor is Dictionary's (Swift's metadata layout: the kind, then the
    /// descriptor). A shortcut taken before the cast to ``CBORDecodableStringMap``, which still
    /// decides: a type that is no dictionary skips that cast, whose miss has the Swift runtime scan
    /// every protocol conformance record of the process (75,000 instructions for each type, the first
    /// time one is decoded, in the lean executables).
    static func isDictionary(_ type: Any.Type) -> Bool {
        let descriptor = nominalDescriptor(of: type)
        return descriptor != 0 && descriptor == dictionaryDescriptor
    }

    /// The address of a struct's nominal type descriptor, or 0 for any other kind of type.
    private static func nominalDescriptor(of type: Any.Type) -> UInt {
        let metadata = unsafeBitCast(type, to: UnsafeRawPointer.self)
        guard metadata.load(as: UInt.self) == 0x200 else { return 0 }
        return metadata.load(fromByteOffset: MemoryLayout<UInt>.size, as: UInt.self)
    }
}
