import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport
import Workloads

/// The sample data exported at a fixed instant in Tokyo, compared byte for byte with the golden
/// files in `Fixtures/`.
@Suite struct ExportSubscriptionsGoldenTests {
    static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures")
    let dir = TemporaryDirectory()

    private func sampleExport(timeZone: TimeZone = SubscriptionSampleData.timeZone) throws -> SubscriptionExport {
        let tracker = try SubscriptionStore(store: dir.store())
        try SubscriptionSampleData.populate(tracker)
        return SubscriptionExport(tracker: tracker, timeZone: timeZone, historyRange: SubscriptionSampleData.historyRange,
                                  clock: { SubscriptionSampleData.exportedAt })
    }

    /// Compares `actual` with the golden file `name`; on a difference, saves `actual` next to the
    /// test's temporary files and says where, so that a reviewed change can be copied over.
    private func expectGolden(_ actual: Data, _ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let golden = Self.fixtures.appendingPathComponent(name)
        let expected = (try? Data(contentsOf: golden)) ?? Data()
        if actual != expected {
            let saved = URL(fileURLWithPath: TemporaryDirectory.systemTemporaryDirectory)
                .appendingPathComponent("kvstore-golden-actual-\(name)")
            try actual.write(to: saved)
            let a = String(decoding: actual, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            let e = String(decoding: expected, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
            let line = zip(a, e).enumerated().first { $0.element.0 != $0.element.1 }?.offset ?? min(a.count, e.count)
            Issue.record("""
                \(name) differs from the golden file at line \(line + 1): got \
                \(line < a.count ? String(reflecting: String(a[line])) : "end of file"), expected \
                \(line < e.count ? String(reflecting: String(e[line])) : "end of file"); actual output saved to \(saved.path)
                """, sourceLocation: sourceLocation)
        }
    }

    @Test func jsonMatchesTheGoldenFileByteForByte() throws {
        let export = try sampleExport()
        let file = try export.tracker.store.read { tx in try export.jsonFile(in: tx) }
        #expect(file.name == "subscriptions_export_20260206_123456.json")
        try expectGolden(file.contents, file.name)
    }

    @Test func csvMatchesTheGoldenFileByteForByte() throws {
        let export = try sampleExport()
        let file = try export.tracker.store.read { tx in try export.csvFile(in: tx) }
        #expect(file.name == "subscriptions_events_20260206_123456.csv")
        try expectGolden(file.contents, file.name)
    }

    @Test func bothFilesComeFromOneSnapshotAndOneInstant() throws {
        let export = try sampleExport()
        let (json, csv) = try export.files()
        #expect(json.name == "subscriptions_export_20260206_123456.json")
        #expect(csv.name == "subscriptions_events_20260206_123456.csv")
        try expectGolden(json.contents, json.name)
        try expectGolden(csv.contents, csv.name)
    }

    @Test func theCSVHeaderIsTheSeedsFixedColumnOrder() throws {
        let export = try sampleExport()
        let expected = "event_id,subscription_id,subscription_name,subscription_status,category,billed_at,amount,currency,"
            + "event_type,is_amount_overridden,memo"
        #expect(SubscriptionExport.csvHeaders.joined(separator: ",") == expected)
        #expect(export.csvWriter.headers == SubscriptionExport.csvHeaders)
        let csv = try export.tracker.store.read { tx in try export.csv(in: tx) }
        #expect(csv.hasPrefix(expected + "\r\n"))
    }

    @Test func anotherTimeZoneChangesOnlyTimestampsAndNames() throws {
        let export = try sampleExport(timeZone: TimeZone(identifier: "America/New_York")!)
        let (json, csv) = try export.files()
        #expect(json.name == "subscriptions_export_20260205_223456.json")
        #expect(csv.name == "subscriptions_events_20260205_223456.csv")
        #expect(json.text.contains("\"exportedAt\": \"2026-02-05T22:34:56-05:00\""))
        #expect(json.text.contains("\"timezone\": \"America/New_York\""))
        // Billing days are calendar days: they do not move with the zone.
        let golden = try String(contentsOf: Self.fixtures.appendingPathComponent("subscriptions_events_20260206_123456.csv"), encoding: .utf8)
        #expect(csv.text == golden)
    }

    @Test(.blockingWork) func csvWithLFLineEndingsHasTheSameFieldsAndNoCROutsideFields() throws {
        var export = try sampleExport()
        export.csvLineEnding = .lf
        let lf = try export.tracker.store.read { tx in try export.csv(in: tx) }
        let file = dir.path + "/lf.csv"
        try Data(lf.utf8).write(to: URL(fileURLWithPath: file))
        let golden = Self.fixtures.appendingPathComponent("subscriptions_events_20260206_123456.csv").path
        #expect(try pythonCSVRows(file) == pythonCSVRows(golden))
        // The only CR left is the one inside News Digital's event memo ("Last charge.\r\n…").
        #expect(lf.unicodeScalars.filter { $0 == "\r" }.count == 1)
        #expect(lf.unicodeScalars.filter { $0 == "\n" }.count == 18 + 2)
    }

    @Test func writingPutsBothFilesInTheDirectoryAtomically() throws {
        let export = try sampleExport()
        let out = dir.path + "/out"
        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false)
        let (jsonPath, csvPath) = try export.write(toDirectory: out)
        #expect(jsonPath == out + "/subscriptions_export_20260206_123456.json")
        #expect(csvPath == out + "/subscriptions_events_20260206_123456.csv")
        let names = try FileManager.default.contentsOfDirectory(atPath: out).sorted()
        #expect(names == ["subscriptions_events_20260206_123456.csv", "subscriptions_export_20260206_123456.json"])
        #expect(SubscriptionExport.jsonFileName.matches(names[1]))
        #expect(SubscriptionExport.csvFileName.matches(names[0]))
        try expectGolden(try Data(contentsOf: URL(fileURLWithPath: jsonPath)), names[1])
        try expectGolden(try Data(contentsOf: URL(fileURLWithPath: csvPath)), names[0])
    }

    @Test func aCorruptAmountIsAClearErrorNotACrash() throws {
        let export = try sampleExport()
        var broken = SubscriptionSampleData.subscriptions[0]
        broken.amount = .nan
        // Bypass validation to plant the bad value, as another program might.
        try export.tracker.subscriptions.put(broken, forKey: broken.id)
        #expect(throws: ExportError.notANumber(path: "$.subscriptions[0].amount")) {
            try export.tracker.store.read { tx in try export.json(in: tx) }
        }
    }
}
