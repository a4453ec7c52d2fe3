import Foundation
import KVStore

/// A parsed JSON value with the line it starts on. Numbers keep their text, so that integers and
/// floats convert exactly; object members keep their order.
struct JSONNode: Sendable {
    indirect enum Kind: Sendable {
        case null
        case bool(Bool)
        case number(String)
        case string(String)
        case array([JSONNode])
        case object([(key: String, value: JSONNode)])
    }

    var line: Int
    var kind: Kind

    /// Compact JSON text for the node.
    var jsonText: String {
        var out = ""
        write(to: &out)
        return out
    }

    private func write(to out: inout String) {
        switch kind {
        case .null: out += "null"
        case .bool(let b): out += b ? "true" : "false"
        case .number(let n): out += n
        case .string(let s): out += JSONText.quoted(s)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                item.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (i, member) in members.enumerated() {
                if i > 0 { out += "," }
                out += JSONText.quoted(member.key) + ":"
                member.value.write(to: &out)
            }
            out += "}"
        }
    }

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

    var typeName: String {
        switch kind {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }
}

extension JSONNode.Kind {
    var isNull: Bool { if case .null = self { return true } else { return false } }
    var isNumber: Bool { if case .number = self { return true } else { return false } }
}
