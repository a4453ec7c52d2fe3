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

    func json(_ entry: HistoryEntry) -> String {
        let fields: [(String, String)] = [
            ("token", String(entry.token.rawValue)),
            ("transaction", String(entry.transactionID)),
            ("author", entry.author.map(JSONText.quoted) ?? "null"),
            ("timestamp", JSONText.quoted(Self.timestamp(entry.timestamp))),
            ("kind", JSONText.quoted(entry.kind)),
            ("name", JSONText.quoted(entry.name)),
            ("key", JSONText.quoted(key(entry))),
            ("operation", JSONText.quoted(entry.operation.rawValue)),
        ]
        return JSONText.object(fields)
    }

    func print(_ entry: HistoryEntry, json: Bool) {
        Swift.print(json ? self.json(entry) : line(entry))
    }
}
