import KVStore

/// A catalog entry's JSON, in the dump's header and `kvtool collections --json`, is its `Codable`
/// encoding: one definition of its members, in KVStore.
extension CatalogEntry {
    /// This entry as JSON: every member `Codable` encodes, those that are `nil` left out, keys in
    /// order (as the dump has always written them).
    var json: JSONValue {
        get throws { try JSONValue(encoding: self).droppingNullMembersSortingKeys() }
    }

    /// The members an entry's JSON may have (its `Codable` keys, the optional ones included).
    static let jsonMembers: Set<String> = memberNames(of: CatalogEntry(
        name: "", kind: .collection, keyEncoding: "", valueEncoding: .bytes, schemaVersion: 0,
        indexes: [], derived: [], derivedFrom: nil, database: "", bucketed: nil))
}

extension CatalogEntry.IndexEntry {
    /// The members an index's JSON may have.
    static let jsonMembers: Set<String> = memberNames(of: CatalogEntry.IndexEntry(name: "", keyEncoding: "", database: ""))
}

/// The member names `value` encodes, `nil` ones included (``JSONValue/init(encoding:)`` writes them
/// as `null`).
private func memberNames(of value: some Encodable) -> Set<String> {
    guard case .object(let members)? = try? JSONValue(encoding: value) else { return [] }
    return Set(members.map(\.key))
}

extension JSONValue {
    /// Objects without their `null` members and with their keys sorted, at every depth.
    func droppingNullMembersSortingKeys() -> JSONValue {
        switch self {
        case .object(let members):
            return .object(members.filter { $0.value != .null }
                .map { JSONValue.Member($0.key, $0.value.droppingNullMembersSortingKeys()) }
                .sorted { $0.key.lowercased() < $1.key.lowercased() })
        case .array(let items):
            return .array(items.map { $0.droppingNullMembersSortingKeys() })
        default:
            return self
        }
    }
}
