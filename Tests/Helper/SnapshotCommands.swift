// kvtest-helper commands for the snapshot and widget-feed tests. main.swift's `default:` branch
// calls `runSnapshotCommand` before giving up on an unknown command.
import Foundation
import KVStore
@_spi(Testing) import SyncKit
import TestSupport
import Workloads

/// Runs one of the commands below; `false` if `command` is not one of them.
func runSnapshotCommand(_ command: String, root: String, group: String, _ rest: [String]) throws -> Bool {
    func container(readOnly: Bool) throws -> SharedContainer {
        var options = SharedContainer.Options()
        options.readOnly = readOnly
        return try SharedContainer(groupIdentifier: group, root: root, options: options)
    }
    func line(_ text: String) {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    switch command {
    case "snapshot-export":
        // snapshot-export ROOT GROUP COUNT: exports COUNT snapshots of the (read-only) store, printing
        // "GENERATION TXN" for each.
        let opened = try container(readOnly: true)
        let snapshots = try Snapshots(container: opened)
        for _ in 0..<Int(rest[0])! {
            let entry = try snapshots.export(from: opened.store)
            line("\(entry.generation) \(entry.sourceTransactionID)")
        }
    case "snapshot-checklist":
        // snapshot-checklist ROOT GROUP GENERATION|latest: opens a snapshot read-only, without the
        // container or its store, and prints what the typed checklist API reads from it, as JSON.
        let snapshots = try Snapshots(groupIdentifier: group, root: root)
        let store = rest[0] == "latest" ? try snapshots.openLatest(verifying: true)
                                        : try snapshots.open(generation: Int(rest[0])!, verifying: true)
        let checklist = try ChecklistStore(store: store)
        let feed = try ChecklistWidgetFeed.build(from: checklist, today: ChecklistDataset.today)
        let (records, summaries, scores) = try store.read { tx in
            (try checklist.records.count(in: tx), try checklist.summaries.count(in: tx),
             try checklist.records.entries(in: tx).reduce(0) { $0 + $1.value.cachedInputCount })
        }
        let object: [String: Any] = [
            "readOnly": store.isReadOnly, "copyFile": store.isCopyFile, "records": records,
            "summaries": summaries, "scores": scores, "current": feed.streak.current,
            "longest": feed.streak.longest, "total": feed.totalAverage ?? -1,
        ]
        line(String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self))
    case "invariant-writer":
        // invariant-writer ROOT GROUP STOPFILE: commits transactions that keep ledgerMeta in step with
        // ledger (count, sum) and with the extra-<k> collections (one entry each), until STOPFILE
        // exists. Prints "ready" after the first commit, then "TXN COUNT SUM EXTRAS" per commit.
        let opened = try container(readOnly: false)
        let store = opened.store
        let ledger = try store.collection("ledger", key: Int.self, value: Int.self)
        let meta = try store.collection("ledgerMeta", key: String.self, value: Int.self)
        var rng = SystemRandomNumberGenerator()
        var extras = 0
        var iteration = 0
        var log: [String] = []
        func commit(extra: KVCollection<Int, Int>?) throws {
            let state = try store.write { tx -> (Int, Int, Int) in
                var count = try meta.get("count", in: tx) ?? 0
                var sum = try meta.get("sum", in: tx) ?? 0
                for _ in 0..<Int.random(in: 1...8, using: &rng) {
                    let key = Int.random(in: 0..<300, using: &rng)
                    let old = try ledger.get(key, in: tx)
                    if old != nil && Bool.random(using: &rng) && Int.random(in: 0..<3, using: &rng) == 0 {
                        try ledger.delete(key, in: tx)
                        count -= 1
                        sum -= old!
                    } else {
                        let value = Int.random(in: -1000...1000, using: &rng)
                        try ledger.put(value, forKey: key, in: tx)
                        if old == nil { count += 1 }
                        sum += value - (old ?? 0)
                    }
                }
                if let extra {
                    try extra.put(extras + 1, forKey: 0, in: tx)
                    try meta.put(extras + 1, forKey: "extras", in: tx)
                }
                try meta.put(count, forKey: "count", in: tx)
                try meta.put(sum, forKey: "sum", in: tx)
                try meta.put(tx.transactionID, forKey: "txn", in: tx)
                return (tx.transactionID, count, sum)
            }
            if extra != nil { extras += 1 }
            log.append("\(state.0) \(state.1) \(state.2) \(extras)")
        }
        try commit(extra: nil)
        line("ready")
        while !FileManager.default.fileExists(atPath: rest[0]) && iteration < 100_000 {
            iteration += 1
            if iteration % 20 == 0 {
                // A new collection, created (in its own transactions) while snapshots are taken.
                try commit(extra: try store.collection("extra-\(extras + 1)", key: Int.self, value: Int.self))
            } else {
                try commit(extra: nil)
            }
        }
        log.forEach(line)
    case "feed-publish":
        // feed-publish ROOT GROUP NAME COUNT SIZE: publishes COUNT TestFeedPayloads; prints the last
        // generation.
        let feed = try WidgetFeed<TestFeedPayload>(name: rest[0], groupIdentifier: group, root: root)
        var last: UInt64 = 0
        for sequence in 0..<Int(rest[1])! {
            last = try feed.publish(TestFeedPayload(sequence: sequence, size: Int(rest[2])!))
        }
        line("\(last)")
    case "feed-read-loop":
        // feed-read-loop ROOT GROUP NAME GENERATION TIMEOUT: reads the feed in a loop until it has seen
        // GENERATION (or TIMEOUT seconds pass) and prints a JSON summary of what it saw.
        let feed = try WidgetFeed<TestFeedPayload>(name: rest[0], groupIdentifier: group, root: root)
        let target = UInt64(rest[1])!
        let deadline = Date(timeIntervalSinceNow: Double(rest[2])!)
        var reads = 0, invalid = 0, decreasing = 0, notPublished = 0, inconsistent = 0
        var last: UInt64 = 0
        var distinct = Set<UInt64>()
        var errors: [String] = []
        while last < target && Date() < deadline {
            do {
                guard let published = try feed.readIfPublished() else { notPublished += 1; continue }
                reads += 1
                if published.generation < last { decreasing += 1 }
                if !published.payload.isConsistent { inconsistent += 1 }
                last = max(last, published.generation)
                distinct.insert(published.generation)
            } catch {
                invalid += 1
                if errors.count < 5 { errors.append("\(error)") }
            }
        }
        let object: [String: Any] = ["reads": reads, "invalid": invalid, "decreasing": decreasing,
                                     "notPublished": notPublished, "inconsistent": inconsistent,
                                     "last": last, "distinct": distinct.count, "errors": errors]
        line(String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self))
    case "feed-publish-hang":
        // feed-publish-hang ROOT GROUP NAME SEQUENCE: starts publishing, and once half the file is
        // written prints "paused" and waits to be killed.
        let feed = try WidgetFeed<TestFeedPayload>(name: rest[0], groupIdentifier: group, root: root)
        try feed.publish(TestFeedPayload(sequence: Int(rest[1])!, size: 4096), midWrite: {
            line("paused")
            while true { sleep(60) }
        })
    case "feed-read":
        // feed-read ROOT GROUP NAME: one read; prints "GENERATION SEQUENCE CONSISTENT".
        let feed = try WidgetFeed<TestFeedPayload>(name: rest[0], groupIdentifier: group, root: root)
        let published = try feed.read()
        line("\(published.generation) \(published.payload.sequence) \(published.payload.isConsistent)")
    case "checklist-feed":
        // checklist-feed ROOT GROUP: reads the checklist widget feed without opening the container and
        // prints its payload as JSON.
        let feed = try WidgetFeed<ChecklistWidgetFeed>(name: ChecklistWidgetFeed.feedName, groupIdentifier: group, root: root)
        let published = try feed.read()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        line("\(published.generation) " + String(decoding: try encoder.encode(published.payload), as: UTF8.self))
    case "seed-checklist":
        // seed-checklist ROOT GROUP: saves the one-year checklist dataset, one transaction per day as
        // the app does; prints the record count.
        let checklist = try ChecklistStore(store: try container(readOnly: false).store)
        for record in ChecklistDataset.records() { try checklist.records.put(record, forKey: record.day) }
        line("\(try checklist.records.count())")
    case "open-store":
        // open-store ROOT GROUP: opens the container read-only; prints "opened" (fails if it cannot).
        _ = try container(readOnly: true)
        line("opened")
    default:
        return false
    }
    return true
}
