import KVStore

/// The catalog entry parser's property: on any key and value bytes, `CatalogEntry.decode(_:key:)`
/// either throws a one-line `KVStoreError.corruptValue` naming `_catalog`, or returns an entry that
/// has no ``CatalogEntry/problem``, sits at its own key, names its own databases, and re-encodes
/// (CBOREncoder) to bytes that parse back to the same entry. Nothing traps.
///
/// Input layout: the first byte is the key length `k` (mod 64), then `k` key bytes, then the value.
public enum CatalogProperty {
    public static func check(_ input: [UInt8]) throws(PropertyViolation) -> FuzzOutcome {
        guard let first = input.first else { return .rejected("empty") }
        let keyLength = min(Int(first % 64), input.count - 1)
        let key = Array(input[1..<(1 + keyLength)])
        let value = Array(input[(1 + keyLength)...])
        let entry: CatalogEntry
        do {
            entry = try CatalogEntry.decode(value, key: key)
        } catch let error as KVStoreError {
            guard case .corruptValue(let collection, _, _, _) = error else {
                throw PropertyViolation("CatalogEntry.decode threw \(error), not corruptValue")
            }
            let text = error.description
            try require(collection == "_catalog", "the error names \(collection), not _catalog")
            try require(!text.contains("\n"), "the error is not one line: \(text)")
            try require(text.utf8.count <= 2_000, "the error is \(text.utf8.count) bytes long")
            return .rejected(text.contains("does not decode") ? "undecodable" : "invalid")
        } catch {
            throw PropertyViolation("CatalogEntry.decode threw a \(type(of: error)): \(error)")
        }
        try require(entry.problem == nil, "an accepted entry has a problem: \(entry.problem ?? "")")
        try require(CatalogEntry.catalogKey(name: entry.name, kind: entry.kind) == key, "an accepted entry is not at its key")
        try require(CatalogEntry.isValidName(entry.name), "an accepted entry has an invalid name")
        try require(!entry.database.contains("..") && !entry.database.hasPrefix("_"),
                    "an accepted entry names database \(entry.database)")
        if case .fixed = entry.valueEncoding {
            try require((1...CatalogEntry.maxFixedValueSize).contains(entry.fixedValueSize ?? 0),
                        "an accepted entry has value encoding \(entry.valueEncoding)")
        }
        let encoded: [UInt8]
        do {
            encoded = try CBOREncoder().encode(entry)
        } catch {
            throw PropertyViolation("an accepted entry does not encode: \(error)")
        }
        let again: CatalogEntry
        do {
            again = try CatalogEntry.decode(encoded, key: key)
        } catch {
            throw PropertyViolation("the entry re-encodes to \(hex(encoded)), which does not parse: \(error)")
        }
        try require(again == entry, "the entry re-encodes to a different entry")
        return .accepted
    }
}
