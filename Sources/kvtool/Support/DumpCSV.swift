import Foundation
import KVStore
import SyncKit

/// `dump --format csv`: one collection as RFC 4180 CSV (CRLF line ends), through SyncKit's
/// ``CSVWriter``. A `key` column, then one column per top-level field of the values (the union of the
/// fields of every value, in the order they are first seen); a value that is not a map goes in a
/// `value` column. Text is written as it is, null as an empty field, other scalars and nested arrays
/// and maps as JSON text (dates, UUIDs and byte strings as `JSONValue(cbor:)` converts them). `load` does not
/// read CSV.
enum DumpCSV {
    struct Row: Sendable {
        var key: String
        var fields: [String: String]
    }

    /// Collects rows; ``render()`` writes them once every column is known.
    struct Builder {
        private(set) var columns: [String] = []
        private var known = Set<String>()
        private(set) var rows: [Row] = []

        mutating func add(key: String, value: CBORValue?) {
            var fields: [String: String] = [:]
            switch value {
            case .map(let entries)?:
                for entry in entries {
                    let name: String
                    if case .text(let text) = entry.key { name = text } else { name = JSONValue.jsonText(entry.key) }
                    column(name)
                    fields[name] = DumpCSV.cell(entry.value)
                }
            case let value?:
                column("value")
                fields["value"] = DumpCSV.cell(value)
            case nil:
                break
            }
            rows.append(Row(key: key, fields: fields))
        }

        private mutating func column(_ name: String) {
            if known.insert(name).inserted { columns.append(name) }
        }

        func render() throws -> String {
            let columns = [CSVColumn<Row>("key") { $0.key }] + columns.map { name in
                CSVColumn<Row>(name) { $0.fields[name] ?? "" }
            }
            return try CSVWriter(columns: columns, lineEnding: .crlf).render(rows)
        }
    }

    /// The text of one field.
    static func cell(_ value: CBORValue) -> String {
        switch value {
        case .text(let text): return text
        case .null, .undefined: return ""
        default:
            // Dates, UUIDs and byte strings convert to JSON strings: the field holds the string itself.
            if case .string(let text) = JSONValue(cbor: value) { return text }
            return JSONValue.jsonText(value)
        }
    }
}
