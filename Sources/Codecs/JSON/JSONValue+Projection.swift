extension JSONValue {
    /// Any bytes as JSON, never failing: what the sync server's SQL function `kvsync_cbor_to_jsonb`
    /// gives for a stored value, computed in Swift (the two are tested against each other).
    ///
    /// - One well-formed CBOR item within ``CBORLimits/default`` (16 MiB, 64 levels of nesting; no
    ///   map with a repeated key; text in UTF-8) converts as ``init(cbor:)`` converts it.
    /// - Anything else is `{"$invalid": "<hex>"}`, the lower-case hex of at most the first 32 bytes:
    ///   bytes that are empty, truncated, malformed, followed by more bytes, nested too deep, that hold
    ///   more than ``projectionMaxItems`` data items, or text that is not UTF-8 or holds U+0000 (which
    ///   PostgreSQL's text and `jsonb` cannot hold).
    ///
    /// ```swift
    /// JSONValue.projecting([0xA1, 0x61, 0x6E, 0x01])   // {"n": 1}
    /// JSONValue.projecting([0x82, 0x01])               // {"$invalid": "8201"}
    /// ```
    ///
    /// The SQL function returns `jsonb`, which keeps the last of two members with the same name (two
    /// keys that convert alike, such as `1` and `"1"`) and numbers as `numeric` (so `-0.0` is `0.0`):
    /// compare this value's JSON text parsed as `jsonb` with it, not the texts.
    public static func projecting(_ bytes: [UInt8]) -> JSONValue {
        var budget = projectionMaxItems
        guard let value = try? CBORValue.decode(bytes), !value.holdsNUL, value.fits(items: &budget) else { return invalid(bytes) }
        return JSONValue(cbor: value)
    }

    /// The most data items (each array item, map key and map value, tag content and the value itself)
    /// that ``projecting(_:)`` converts: 2^20. The server converts in PL/pgSQL, about 2.5 µs and a few
    /// dozen bytes of memory an item, so this bounds what one hostile value costs it (a second or two,
    /// tens of MiB) below what 16 MiB of one-byte items would (16 million items).
    public static let projectionMaxItems = 1 << 20

    /// `{"$invalid": "<hex>"}` of at most the first 32 of `bytes`.
    static func invalid(_ bytes: [UInt8]) -> JSONValue {
        .object([Member("$invalid", .string(Hex.encode(bytes.prefix(32))))])
    }
}

extension CBORValue {
    /// Whether the item holds at most `budget` data items, counting them off it.
    func fits(items budget: inout Int) -> Bool {
        budget -= 1
        guard budget >= 0 else { return false }
        switch self {
        case .array(let items):
            for item in items where !item.fits(items: &budget) { return false }
        case .map(let entries):
            for entry in entries where !entry.key.fits(items: &budget) || !entry.value.fits(items: &budget) { return false }
        case .tagged(_, let item):
            return item.fits(items: &budget)
        default:
            break
        }
        return true
    }

    /// Whether a text string in the item (a map key included) holds U+0000.
    var holdsNUL: Bool {
        switch self {
        case .text(let s): s.utf8.contains(0)
        case .array(let items): items.contains { $0.holdsNUL }
        case .map(let entries): entries.contains { $0.key.holdsNUL || $0.value.holdsNUL }
        case .tagged(_, let item): item.holdsNUL
        default: false
        }
    }
}
