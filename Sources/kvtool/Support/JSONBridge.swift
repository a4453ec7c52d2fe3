import Foundation
import KVStore

/// JSON typed on the command line (or sent to `kvtool serve`) as CBOR. The other way, stored CBOR
/// shown as JSON, is `JSONValue(cbor:)` in KVStore.
enum JSONBridge {
    /// Parses JSON text typed by people (strict RFC 8259, as dumps are read: duplicate keys refused,
    /// errors naming the column) into CBOR: integers stay integers, other numbers become floats,
    /// object members are sorted by key. A value the store could not read back (nested deeper than
    /// CBOR's depth limit) is refused.
    static func cbor(fromJSON text: String) throws -> CBORValue {
        try cbor(try parse(Array(text.utf8)))
    }

    /// Parses one JSON value (strict RFC 8259: duplicate keys refused, errors naming the column).
    static func parse(_ bytes: [UInt8]) throws -> JSONNode {
        var parser = JSONParser(bytes, range: 0 ..< bytes.count, firstLine: 1, maxDepth: DumpLimits.maxJSONDepth)
        let node: JSONNode
        do throws(JSONParser.SyntaxError) {
            node = try parser.parseValue()
            parser.skipWhitespace()
            guard parser.isAtEnd else { throw parser.unexpected("the end of the input") }
        } catch {
            let place = error.line > 1 ? "line \(error.line), column \(error.column)" : "column \(error.column)"
            throw CLIError(.badInput, "invalid JSON at \(place): \(error.message)")
        }
        return node
    }

    /// A parsed value as CBOR, as ``cbor(fromJSON:)`` converts it.
    static func cbor(_ node: JSONNode) throws -> CBORValue {
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
