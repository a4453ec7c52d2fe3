import ArgumentParser
import Foundation
import KVStore
import SyncKit

/// `kvtool info`: the container, its environment, collections, suites, history and snapshots.
struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show the container: LMDB environment, collections, defaults suites, history, consumers and snapshots.",
        discussion: "Everything about the store comes from one read transaction per section; nothing is written.")

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let container = try global.openContainer(readOnly: true)
        let env = try container.store.environmentInfo()
        let counted = try container.store.catalogWithCounts()
        let history = try HistorySummary(container: container, catalog: counted.map(\.entry))
        let snapshots = try Self.snapshots(of: container)
        let collections = counted.filter { $0.entry.kind == .collection }
        let suites = counted.filter { $0.entry.kind == .defaults }

        if global.json {
            var members: [JSONValue.Member] = [
                .init("path", .string(container.path)),
                .init("group", .string(container.groupIdentifier.rawValue)),
                .init("environment", [
                    "mapSize": .integer(env.mapSize), "pageSize": .integer(env.pageSize), "usedPages": .integer(env.usedPages),
                    "freePages": .integer(env.freePages), "lastTransactionID": .integer(env.lastTransactionID),
                    "maxReaders": .integer(env.maxReaders), "readersUsed": .integer(env.readersUsed),
                ]),
                .init("collections", .array(try collections.map { try Collections.json($0.entry, count: $0.count) })),
                .init("defaults", .array(suites.map { ["name": .string($0.entry.name), "keys": .integer($0.count)] })),
                .init("snapshots", .array(snapshots.map(Snapshot.json))),
            ]
            if let history = history.json { members.append(.init("history", history)) }
            try Output.json(.object(members))
            return
        }
        let mapPages = env.pageSize > 0 ? env.mapSize / env.pageSize : 0
        print("container  \(container.path)")
        print("map size   \(env.mapSize) bytes (\(mapPages) pages of \(env.pageSize) bytes)")
        print("pages      \(env.usedPages) used, \(env.freePages) free for reuse")
        print("last txn   \(env.lastTransactionID)")
        print("readers    \(env.readersUsed) used of \(env.maxReaders)")
        print("")
        Collections.printTable(counted.map(\.entry), counts: counted.map(\.count))
        print("")
        print(history.summaryLine)
        if !history.enabledFor.isEmpty { print("  recorded for \(history.enabledFor.joined(separator: ", "))") }
        if !history.consumers.isEmpty {
            print("")
            Output.table(["CONSUMER", "TOKEN", "BEHIND", "LAST SEEN"], history.consumers.map {
                [$0.name, String($0.token.rawValue), String(history.behind($0)), HistoryText.timestamp($0.updatedAt)]
            })
        }
        print("")
        if snapshots.isEmpty {
            print("snapshots  none")
        } else {
            Output.table(["SNAPSHOT", "SOURCE TXN", "SIZE", "CREATED"], snapshots.map {
                [String($0.generation), String($0.sourceTransactionID), String($0.size), Snapshot.timestamp($0.createdAt)]
            })
        }
    }

    /// The published snapshots, or none if the container has no `Snapshots/` yet.
    static func snapshots(of container: SharedContainer) throws -> [SnapshotEntry] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: container.snapshotsDirectory, isDirectory: &isDirectory),
              isDirectory.boolValue else { return [] }
        return try Snapshot.mappingErrors {
            try Snapshots(directory: container.snapshotsDirectory, create: false).list()
        }
    }
}

/// What `info` says about history: the token range, the targets recorded, and the consumers.
struct HistorySummary {
    var recorded = false
    var entries = 0
    var first: UInt64?
    var current = ChangeToken.zero
    var purgedThrough = ChangeToken.zero
    var enabledFor: [String] = []
    var consumers: [ConsumerInfo] = []

    init(container: SharedContainer, catalog: [CatalogEntry]) throws {
        guard catalog.contains(where: { $0.kind == .collection && $0.name == History.entriesName }) else { return }
        let history = try History.attach(to: container.store)
        recorded = true
        current = try history.currentToken()
        purgedThrough = try history.purgedThrough()
        let (_, raw) = try container.store.untypedCollection(named: History.entriesName)
        entries = try raw.count()
        if let firstKey = try raw.entries(limit: 1).first?.key {
            first = try UInt64.decodeKey(firstKey.bytes)
        }
        for entry in catalog where !History.collectionNames.contains(entry.name) {
            let target: Mutation.Target = entry.kind == .collection ? .collection(entry.name) : .defaults(entry.name)
            if try history.isEnabled(target) { enabledFor.append(target.description) }
        }
        consumers = try history.consumers()
    }

    func behind(_ consumer: ConsumerInfo) -> UInt64 {
        current.rawValue - min(consumer.token.rawValue, current.rawValue)
    }

    var summaryLine: String {
        guard recorded else { return "history    not recorded in this container" }
        let range = first.map { "tokens \($0)–\(current.rawValue)" } ?? "no entries (last token \(current.rawValue))"
        return "history    \(entries) entries, \(range), purged through \(purgedThrough.rawValue)"
    }

    var json: JSONValue? {
        guard recorded else { return nil }
        var members: [JSONValue.Member] = [
            .init("entries", .integer(entries)), .init("currentToken", .integer(current.rawValue)),
            .init("purgedThrough", .integer(purgedThrough.rawValue)),
            .init("enabledFor", .array(enabledFor.map(JSONValue.string))),
            .init("consumers", .array(consumers.map {
                ["name": .string($0.name), "token": .integer($0.token.rawValue), "behind": .integer(behind($0)),
                 "updatedAt": .string(HistoryText.timestamp($0.updatedAt))]
            })),
        ]
        if let first { members.append(.init("firstToken", .integer(first))) }
        return .object(members)
    }
}
