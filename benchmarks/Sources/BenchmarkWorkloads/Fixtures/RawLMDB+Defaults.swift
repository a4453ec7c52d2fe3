import CLMDB
import KVStore

/// "key-0"…"key-99" → the CBOR text of "value-0"…"value-99" (the bytes KVStore's defaults store), keys
/// as their UTF-8 bytes.
extension RawLMDB {
    private static let defaults = Result { () throws -> RawLMDB in
        let raw = try RawLMDB("raw-defaults", databases: ["defaults"])
        let encoder = CBOREncoder()
        try raw.write { txn in
            for i in 0..<100 {
                let key = Array("key-\(i)".utf8), value = try encoder.encode("value-\(i)")
                try key.withUnsafeBytes { k in try value.withUnsafeBytes { v in try put(txn, raw.database("defaults"), k, v) } }
            }
        }
        return raw
    }

    static func sharedDefaults() throws -> RawLMDB { try defaults.get() }

    /// The string at `key`: `mdb_get` in the renewed read transaction, then the CBOR text string's head
    /// read and its bytes checked as UTF-8. `nil` for a missing key or a value of another type.
    func string(forKey key: String) throws -> String? {
        let dbi = database("defaults")
        var key = key
        return try read { txn in
            try key.withUTF8 { k in
                guard let value = try Self.get(txn, dbi, UnsafeRawBufferPointer(k)) else { return nil }
                return try Self.text(value)
            }
        }
    }

    /// The CBOR text string (major type 3, definite length) that is all of `bytes`, or `nil` for another
    /// type; throws if it is truncated, followed by other bytes, or not UTF-8.
    private static func text(_ bytes: UnsafeRawBufferPointer) throws -> String? {
        guard let first = bytes.first, first >> 5 == 3 else { return nil }
        var reader = FloorReader(bytes)
        let text = try reader.text()
        try reader.finish()
        return text
    }
}
