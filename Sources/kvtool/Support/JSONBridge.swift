import Foundation
import KVStore

/// Converts stored CBOR values to JSON text for people and scripts, and JSON typed on the command
/// line to CBOR.
enum JSONBridge {
    /// JSON text for a CBOR value. Dates become ISO 8601 strings, UUIDs strings, decimal fractions
    /// exact JSON numbers, byte strings base64 strings; map entries keep their stored order.
    static func json(_ value: CBORValue) -> String {
        var out = ""
        write(value, to: &out)
        return out
    }

    private static func write(_ value: CBORValue, to out: inout String) {
        switch value {
        case .unsigned(let n): out += String(n)
        case .negative(let n): out += n == .max ? "-18446744073709551616" : "-\(n + 1)"
        case .float(let d): out += d.isFinite ? (d == d.rounded() && abs(d) < 1e15 ? String(format: "%.1f", d) : "\(d)") : "null"
        case .text(let s): out += JSONText.quoted(s)
        case .bytes(let b): out += JSONText.quoted(Data(b).base64EncodedString())
        case .bool(let b): out += b ? "true" : "false"
        case .null, .undefined: out += "null"
        case .simple(let s): out += String(s)
        case .array(let items):
            out += "["
            for (i, item) in items.enumerated() {
                if i > 0 { out += "," }
                write(item, to: &out)
            }
            out += "]"
        case .map(let entries):
            out += "{"
            for (i, entry) in entries.enumerated() {
                if i > 0 { out += "," }
                switch entry.key {
                case .text(let s): out += JSONText.quoted(s)
                default: out += JSONText.quoted(json(entry.key))
                }
                out += ":"
                write(entry.value, to: &out)
            }
            out += "}"
        case .tagged(let tag, let content):
            switch tag {
            case CBORTag.epochDate, CBORTag.referenceDate, CBORTag.uuid, CBORTag.decimalFraction:
                if let text = try? special(value) {
                    out += tag == CBORTag.decimalFraction ? text : JSONText.quoted(text)
                } else {
                    write(content, to: &out)
                }
            default:
                write(content, to: &out)
            }
        }
    }

    private static func special(_ value: CBORValue) throws -> String {
        guard case .tagged(let tag, _) = value else { return "" }
        let bytes = value.encoded()
        switch tag {
        case CBORTag.uuid: return try CBORDecoder().decode(UUID.self, from: bytes).uuidString
        case CBORTag.decimalFraction: return "\(try CBORDecoder().decode(Decimal.self, from: bytes))"
        default:
            let date = try CBORDecoder().decode(Date.self, from: bytes)
            return date.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true))
        }
    }

    /// Parses JSON text typed by people (strict RFC 8259, as dumps are read: duplicate keys refused,
    /// errors naming the column) into CBOR: integers stay integers, other numbers become floats,
    /// object members are sorted by key. A value the store could not read back (nested deeper than
    /// CBOR's depth limit) is refused.
    static func cbor(fromJSON text: String) throws -> CBORValue {
        let bytes = Array(text.utf8)
        var parser = JSONParser(bytes, range: 0 ..< bytes.count, firstLine: 1)
        let node: JSONNode
        do throws(JSONParser.SyntaxError) {
            node = try parser.parseValue()
            parser.skipWhitespace()
            guard parser.isAtEnd else { throw parser.unexpected("the end of the input") }
        } catch {
            let place = error.line > 1 ? "line \(error.line), column \(error.column)" : "column \(error.column)"
            throw CLIError(.badInput, "invalid JSON at \(place): \(error.message)")
        }
        let value: CBORValue
        do {
            value = try node.cbor(depth: 0)
        } catch let error as JSONNode.ConversionError {
            throw CLIError(.badInput, "invalid JSON: \(error.message)")
        }
        do {
            _ = try CBORValue.decode(value.encoded())
        } catch {
            throw CLIError(.badInput, "the value cannot be stored: \(error)")
        }
        return value
    }
}
