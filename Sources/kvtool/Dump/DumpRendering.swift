import Foundation
import KVStore

/// The readable forms of a dump's entry: what `dump` writes as `key` and `value`, and what `load`
/// compares a line's readable forms with (a line whose readable and raw forms disagree is refused).
enum DumpRendering {
    /// The rendered key and value of an entry, as JSON; `null` where they cannot be rendered.
    static func render(key: [UInt8], value: [UInt8], role: DumpDatabaseRole?, database: String, line: Int,
                       note: (String) -> Void = { _ in }) -> (JSONValue, JSONValue) {
        func hex(_ bytes: [UInt8]) -> JSONValue { .string("0x" + Hex.encode(bytes)) }
        guard let role else { return (.null, .null) }
        var keyJSON = JSONValue.null
        if let encoding = role.keyEncoding() {
            if let rendered = try? encoding.render(key) {
                keyJSON = rendered.json
                if case .index(let collection, let index) = role, case .array(let parts) = rendered,
                   let indexEncoding = KeyEncoding(index.keyEncoding), let primary = KeyEncoding(collection.keyEncoding) {
                    // The index key, then the primary key.
                    let split = DumpDatabaseRole.parts(indexEncoding).count
                    func group(_ slice: ArraySlice<KeyValue>, _ encoding: KeyEncoding) -> JSONValue {
                        if case .tuple = encoding { return KeyValue.array(Array(slice)).json }
                        return slice.first?.json ?? .null
                    }
                    if split < parts.count {
                        keyJSON = [group(parts[..<split], indexEncoding), group(parts[split...], primary)]
                    }
                }
            } else {
                note("line \(line): the key 0x\(Hex.encode(key)) in '\(database)' does not decode as \(encoding); dumped raw only")
            }
        }
        switch role {
        case .collection(let entry), .suite(let entry):
            guard entry.valueEncoding == .cbor else { return (keyJSON, hex(value)) }
            do {
                return (keyJSON, JSONValue(cbor: try CBORValue.decode(value)))
            } catch {
                note("line \(line): the value at key \(DumpError.describeKey(key, encoding: role.keyEncoding())) in '\(database)' is not valid CBOR (\(error)); dumped raw only")
                return (keyJSON, .null)
            }
        case .index:
            return (keyJSON, value.isEmpty ? .null : hex(value))
        case .requirements:
            let text = { (bytes: [UInt8]) in JSONValue.string(orNull: String(validating: bytes, as: UTF8.self)) }
            return (text(key), text(value))
        }
    }
}
