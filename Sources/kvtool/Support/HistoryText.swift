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
    func key(_ entry: HistoryEntry) -> String {
        if case .defaults = entry.target { return String(decoding: entry.key, as: UTF8.self) }
        if let collection = catalog[entry.name], let text = try? ValueText.renderKey(entry.key, entry: collection) {
            return text
        }
        return "0x" + Hex.encode(entry.key)
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
