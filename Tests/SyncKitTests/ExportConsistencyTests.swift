import Foundation
import KVStore
import Synchronization
import SyncKit
import Testing
import TestSupport
import Workloads

/// A writer thread that keeps committing new "generations" of the sample data: each commit sets
/// Netflix's amount to the generation number and every event's memo to "generation N", together.
private final class GenerationWriter: Sendable {
    let tracker: SubscriptionStore
    let committed = Atomic<Int>(0)
    let stop = Atomic<Bool>(false)
    let failures = Mutex<[String]>([])
    private let done = DispatchSemaphore(value: 0)

    init(tracker: SubscriptionStore) { self.tracker = tracker }

    func start() {
        Thread { [self] in
            defer { done.signal() }
            var generation = 0
            while !stop.load(ordering: .acquiring) {
                generation += 1
                do {
                    try tracker.store.write(author: "writer") { tx in
                        var netflix = try tracker.subscriptions.get(SubscriptionSampleData.netflixID, in: tx)!
                        netflix.amount = Decimal(generation)
                        try tracker.subscriptions.put(netflix, forKey: netflix.id, in: tx)
                        for (id, var event) in try tracker.billingEvents.entries(in: tx) {
                            event.memo = "generation \(generation)"
                            try tracker.billingEvents.put(event, forKey: id, in: tx)
                        }
                    }
                    committed.store(generation, ordering: .releasing)
                } catch {
                    failures.withLock { $0.append("\(error)") }
                    return
                }
            }
        }.start()
    }

    func finish() {
        stop.store(true, ordering: .releasing)
        done.wait()
    }

    /// Waits until at least `generation` is committed (at most 10 s).
    func wait(forGeneration generation: Int) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while committed.load(ordering: .acquiring) < generation {
            if Date() > deadline || !failures.withLock({ $0.isEmpty }) { return false }
            usleep(1000)
        }
        return true
    }
}

/// The generation an export shows, checking that every part of it shows the same one.
private func generation(ofJSON json: String, csv: String) throws -> Int {
    let root = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
    let subscriptions = try #require(root["subscriptions"] as? [[String: Any]])
    let netflix = try #require(subscriptions.first { $0["id"] as? String == "a1000000-0000-4000-8000-000000000001" })
    let amount = try #require(netflix["amount"] as? Int)
    let events = try #require(root["billingEvents"] as? [[String: Any]])
    #expect(events.count == 17)
    let memos = Set(events.map { $0["memo"] as? String })
    #expect(memos == ["generation \(amount)"], "events from several commits in one export")
    let lines = csv.components(separatedBy: "\r\n").dropFirst().filter { !$0.isEmpty }
    #expect(lines.count == 17)
    #expect(lines.allSatisfy { $0.hasSuffix(",generation \(amount)") }, "CSV from another commit than the JSON")
    return amount
}

@Suite struct ExportConsistencyTests {
    let dir = TemporaryDirectory()

    private func setUp() throws -> (SubscriptionStore, SubscriptionExport, GenerationWriter) {
        let tracker = try SubscriptionStore(store: dir.store())
        try SubscriptionSampleData.populate(tracker)
        let export = SubscriptionExport(tracker: tracker, timeZone: SubscriptionSampleData.timeZone,
                                        clock: { SubscriptionSampleData.exportedAt })
        return (tracker, export, GenerationWriter(tracker: tracker))
    }

    @Test(.blockingWork) func anExportSeesOneCommittedStateWhileAnotherThreadCommits() throws {
        let (_, export, writer) = try setUp()
        writer.start()
        defer { writer.finish() }
        #expect(writer.wait(forGeneration: 1))
        var seen = Set<Int>()
        for _ in 0..<40 {
            let (json, csv) = try export.files()
            seen.insert(try generation(ofJSON: json.text, csv: csv.text))
        }
        #expect(writer.failures.withLock { $0 } == [])
        // The writer really ran between the exports.
        #expect(seen.count > 1, "all exports saw generation \(seen); the writer did not interleave")
    }

    @Test(.blockingWork) func theTransactionGivenIsTheOneReadEvenWhileNewerCommitsLand() throws {
        let (tracker, export, writer) = try setUp()
        writer.start()
        defer { writer.finish() }
        #expect(writer.wait(forGeneration: 1))
        let (before, after) = try tracker.store.read { tx in
            let first = try export.files(in: tx)
            let seenGeneration = try generation(ofJSON: first.json.text, csv: first.csv.text)
            // Let the writer commit two more generations, then export again through the same transaction.
            #expect(writer.wait(forGeneration: seenGeneration + 2))
            let second = try export.files(in: tx)
            #expect(second.json.contents == first.json.contents)
            #expect(second.csv.contents == first.csv.contents)
            return (seenGeneration, try generation(ofJSON: second.json.text, csv: second.csv.text))
        }
        #expect(before == after)
        // A new transaction sees the newer state.
        let (json, csv) = try export.files()
        #expect(try generation(ofJSON: json.text, csv: csv.text) >= before + 2)
        #expect(writer.failures.withLock { $0 } == [])
    }
}
