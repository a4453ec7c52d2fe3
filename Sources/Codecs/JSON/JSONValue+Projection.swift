extension JSONValue {
    /// Any bytes as JSON, never failing: what the sync server's SQL function `kvsync_cbor_to_jsonb`
    /// gives for a stored value, computed in Swift (the two are tested against each other).
    ///
    /// - One well-formed CBOR item within ``CBORLimits/default`` (16 MiB, 64 levels of nesting; no
    ///   map with a repeated key; text in UTF-8) converts as ``init(cbor:)`` converts it.
    /// - Anything else is `{"$invalid": "<hex>"}`, the lower-case hex of at most the first 32 bytes:
    ///   bytes that are empty, truncated, malformed, followed by more bytes, nested too deep, or that
    ///   hold text that is not UTF-8 or holds U+0000 (which PostgreSQL's text and `jsonb` cannot hold).
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
        guard let value = try? CBORValue.decode(bytes), !value.holdsNUL else { return invalid(bytes) }
        return JSONValue(cbor: value)
    }

    /// `{"$invalid": "<hex>"}` of at most the first 32 of `bytes`.
    static func invalid(_ bytes: [UInt8]) -> JSONValue {
        .object([Member("$invalid", .string(Hex.encode(bytes.prefix(32))))])
    }
}

extension CBORValue {
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
