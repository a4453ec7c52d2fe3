import Foundation
import KVStore
import SyncKit

/// History entries rendered for people (one aligned line each) and scripts (one JSON object each).
struct HistoryText: Sendable {
    let catalog: [String: CatalogEntry]

    init(store: Store) throws {
        catalog = Dictionary(try store.catalog().filter { $0.kind == .collection }.map { ($0.name, $0) },
                             uniquingKeysWith: { first, _ in first })
    }

    /// The key as text: through the collection's key encoding, or the UTF-8 key of a defaults suite.
    func key(_ entry: HistoryEntry) -> String { key(entry.key, of: entry.target) }

    /// `bytes`, a key of `target`, as `kvtool get` (or `defaults read`) takes it: through the
    /// collection's key encoding, or the UTF-8 key of a defaults suite; `0x` and its hex when the
    /// collection is not here or the key does not decode.
    func key(_ bytes: [UInt8], of target: Mutation.Target) -> String {
        switch target {
        case .defaults:
            if let text = String(validating: bytes, as: UTF8.self) { return text }
        case .collection(let name):
            if let collection = catalog[name], let text = try? ValueText.renderKey(bytes, entry: collection) { return text }
        }
        return "0x" + Hex.encode(bytes)
    }

    /// `bytes`, a value of `target`, as JSON: through the collection's value encoding; `0x` and its hex
    /// for a defaults suite, a collection not here, or a value that does not decode.
    func value(_ bytes: [UInt8], of target: Mutation.Target?) -> JSONValue {
        if case .collection(let name)? = target, let collection = catalog[name],
           let value = try? ValueText.render(bytes, entry: collection, key: "") {
            return value
        }
        return .string("0x" + Hex.encode(bytes))
    }

    static func timestamp(_ date: Date) -> String {
        Date.ISO8601FormatStyle(includingFractionalSeconds: true).format(date)
    }

    func line(_ entry: HistoryEntry) -> String {
        let target = if case .defaults(let name) = entry.target { "defaults:\(name)" } else { entry.name }
        return [String(entry.token.rawValue), Self.timestamp(entry.timestamp), "txn \(entry.transactionID)",
                entry.author ?? "-", entry.operation.rawValue, target, key(entry)].joined(separator: "  ")
    }

    func json(_ entry: HistoryEntry) -> JSONValue {
        [
            "token": .integer(entry.token.rawValue),
            "transaction": .integer(entry.transactionID),
            "author": .string(orNull: entry.author),
            "timestamp": .string(Self.timestamp(entry.timestamp)),
            "kind": .string(entry.kind),
            "name": .string(entry.name),
            "key": .string(key(entry)),
            "operation": .string(entry.operation.rawValue),
        ]
    }

    func print(_ entry: HistoryEntry, json: Bool) throws {
        Swift.print(json ? try Output.line(self.json(entry)) : line(entry))
    }
}
