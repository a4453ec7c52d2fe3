import KVStore

extension JSONNode {
    struct ConversionError: Error {
        var message: String
    }

    /// The value as CBOR, as `kvtool put` converts JSON: integers stay integers (if they fit 64 bits),
    /// other numbers become floats, object members are sorted by key.
    func cbor(depth: Int) throws -> CBORValue {
        guard depth <= DumpLimits.maxJSONDepth else { throw ConversionError(message: "nested too deeply") }
        switch kind {
        case .null: return .null
        case .bool(let b): return .bool(b)
        case .number(let text):
            if !text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) {
                if let v = Int64(text) { return v >= 0 ? .unsigned(UInt64(v)) : .negative(UInt64(~v)) }
                if let v = UInt64(text) { return .unsigned(v) }
            }
            guard let v = Double(text), v.isFinite else { throw ConversionError(message: "the number \(text.prefix(40)) is out of range") }
            return .float(v)
        case .string(let s): return .text(s)
        case .array(let items): return .array(try items.map { try $0.cbor(depth: depth + 1) })
        case .object(let members):
            return .map(try members.sorted { $0.key < $1.key }.map {
                CBORMapEntry(key: .text($0.key), value: try $0.value.cbor(depth: depth + 1))
            })
        }
    }
}
