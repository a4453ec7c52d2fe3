#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Converts between the property-list values `UserDefaults` accepts and ``CBORValue``.
enum PropertyListValue {
    static func cbor(from value: Any, key: String) throws -> CBORValue {
        switch value {
        // An `NSNumber` (from Foundation, which KVStore does not link) bridges to the first of these
        // casts that holds its value exactly: booleans and integers to `Int`, fractions to `Double`.
        case let v as String: return .text(v)
        case let v as Bool where type(of: value) == Bool.self: return .bool(v)
        case let v as Int: return integer(Int64(v))
        case let v as Int8: return integer(Int64(v))
        case let v as Int16: return integer(Int64(v))
        case let v as Int32: return integer(Int64(v))
        case let v as Int64: return integer(v)
        case let v as UInt: return .unsigned(UInt64(v))
        case let v as UInt8: return .unsigned(UInt64(v))
        case let v as UInt16: return .unsigned(UInt64(v))
        case let v as UInt32: return .unsigned(UInt64(v))
        case let v as UInt64: return .unsigned(v)
        case let v as Double: return .float(v)
        case let v as Float: return .float(Double(v))
        case let v as Data: return .bytes(Array(v))
        case let v as [UInt8]: return .bytes(v)
        case let v as Date: return try CBORValue.decode(CBOREncoder().encode(v))
        case let v as URL: return .tagged(CBORTag.uri, .text(v.absoluteString))
        case let v as [Any]:
            return .array(try v.map { try cbor(from: $0, key: key) })
        case let v as [String: Any]:
            return .map(try v.sorted { $0.key < $1.key }.map {
                CBORMapEntry(key: .text($0.key), value: try cbor(from: $0.value, key: key))
            })
        default:
            throw KVStoreError.notAPropertyList(key: key, type: String(describing: type(of: value)))
        }
    }

    private static func integer(_ v: Int64) -> CBORValue {
        v >= 0 ? .unsigned(UInt64(v)) : .negative(UInt64(-1 - v))
    }

    /// A Foundation value for a stored CBOR value: `Int`, `Double`, `String`, `Bool`, `Data`, `Date`,
    /// `URL`, `UUID`, `Decimal`, `[Any]`, `[String: Any]`. CBOR null (which no property list holds, but a
    /// Codable value can store) becomes `Optional<Any>.none`: KVStore links FoundationEssentials, which
    /// has no `NSNull`.
    static func object(from value: CBORValue) throws -> Any {
        switch value {
        case .unsigned(let n): return n <= UInt64(Int.max) ? Int(n) : n
        case .negative(let n): return n < UInt64(Int.max) ? -1 - Int(n) : -1 - Double(n)
        case .float(let d): return d
        case .text(let s): return s
        case .bytes(let b): return Data(b)
        case .bool(let b): return b
        case .null, .undefined: return Optional<Any>.none as Any
        case .simple(let s): return Int(s)
        case .array(let items): return try items.map { try object(from: $0) }
        case .map(let entries):
            var result: [String: Any] = [:]
            for entry in entries {
                let key: String
                switch entry.key {
                case .text(let s): key = s
                case .unsigned(let n): key = String(n)
                case .negative(let n): key = "-\(n + 1)"
                default: throw CBORError(.typeMismatch, "map key is not a string")
                }
                result[key] = try object(from: entry.value)
            }
            return result
        case .tagged(let tag, let content):
            switch tag {
            case CBORTag.epochDate, CBORTag.referenceDate:
                return try CBORDecoder().decode(Date.self, from: value.encoded())
            case CBORTag.uuid:
                return try CBORDecoder().decode(UUID.self, from: value.encoded())
            case CBORTag.decimalFraction:
                return try CBORDecoder().decode(Decimal.self, from: value.encoded())
            case CBORTag.uri:
                if case .text(let s) = content, let url = URL(string: s) { return url }
                return try object(from: content)
            default:
                return try object(from: content)
            }
        }
    }
}
