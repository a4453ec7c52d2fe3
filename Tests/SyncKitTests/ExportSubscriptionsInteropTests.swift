import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport
import Workloads

/// The subscription exports read by other programs: the CSV by Python's `csv` module, the JSON by
/// `JSONSerialization`, each checked field by field against what the store holds.
@Suite struct ExportSubscriptionsInteropTests {
    let dir = TemporaryDirectory()

    private func populated() throws -> (tracker: SubscriptionStore, export: SubscriptionExport) {
        let tracker = try SubscriptionStore(store: dir.store())
        try SubscriptionSampleData.populate(tracker)
        let export = SubscriptionExport(tracker: tracker, timeZone: SubscriptionSampleData.timeZone,
                                        historyRange: SubscriptionSampleData.historyRange,
                                        clock: { SubscriptionSampleData.exportedAt })
        return (tracker, export)
    }

    /// The store's contents, read straight from the collections (not through the export).
    private func source(_ tracker: SubscriptionStore) throws -> (subscriptions: [UUID: Subscription], events: [BillingEvent]) {
        try tracker.store.read { tx in
            let subscriptions = try tracker.subscriptions.entries(in: tx).map(\.value)
            let events = try tracker.billingEvents.entries(in: tx).map(\.value)
            return (Dictionary(uniqueKeysWithValues: subscriptions.map { ($0.id, $0) }), events)
        }
    }

    @Test(.blockingWork) func pythonReadsEveryCSVFieldAsItIsInTheStore() throws {
        let (tracker, export) = try populated()
        let (subscriptions, events) = try source(tracker)
        let (_, csv) = try export.files()
        let path = try csv.write(toDirectory: dir.path)
        let rows = try pythonCSVRows(path)

        try #require(rows.count == 1 + events.count)
        #expect(rows[0] == SubscriptionExport.csvHeaders)
        var seen = Set<String>()
        for row in rows.dropFirst() {
            try #require(row.count == 11, "\(row)")
            let event = try #require(events.first { $0.id.uuidString.lowercased() == row[0] }, "unknown event \(row[0])")
            let subscription = try #require(subscriptions[event.subscriptionId])
            #expect(row == [
                event.id.uuidString.lowercased(), subscription.id.uuidString.lowercased(), subscription.name,
                subscription.status.rawValue, subscription.category ?? "", event.billedAt.description,
                "\(event.amount)", event.currency, event.eventType.rawValue, event.isAmountOverridden ? "true" : "false",
                event.memo ?? "",
            ])
            seen.insert(row[0])
        }
        #expect(seen.count == events.count)
        // Memos with commas, quotes, LF and CRLF came back intact.
        let memos = rows.dropFirst().map { $0[10] }
        #expect(memos.contains("Family plan,\nshared with 2"))
        #expect(memos.contains("Price up, \"limited\" lot"))
        #expect(memos.contains("Last charge.\r\nRefund: \"none\""))
        // Lines are in billing-date order.
        let billed = rows.dropFirst().map { $0[5] }
        #expect(billed == billed.sorted())
    }

    @Test func jsonSerializationReadsTheSeedsRequiredFields() throws {
        let (tracker, export) = try populated()
        let (subscriptions, events) = try source(tracker)
        let text = try tracker.store.read { tx in try export.json(in: tx) }
        let root = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])

        #expect(Set(root.keys) == ["schemaVersion", "exportedAt", "settings", "subscriptions", "billingEvents"])
        #expect(root["schemaVersion"] as? String == "1.0")
        let exportedAt = try #require(root["exportedAt"] as? String)
        #expect(exportedAt.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}[+-]\d{2}:\d{2}/) != nil)
        #expect(ISO8601DateFormatter().date(from: exportedAt) == SubscriptionSampleData.exportedAt)
        let settings = try #require(root["settings"] as? [String: Any])
        #expect(settings["timezone"] as? String == "Asia/Tokyo")
        let historyRange = try #require(settings["historyRange"] as? [String: Any])
        #expect(historyRange["pastMonths"] as? Int == 2)
        #expect(historyRange["futureMonths"] as? Int == 3)

        let jsonSubscriptions = try #require(root["subscriptions"] as? [[String: Any]])
        #expect(jsonSubscriptions.count == subscriptions.count)
        var subscriptionIDs = Set<String>()
        for object in jsonSubscriptions {
            #expect(Set(object.keys) == ["id", "name", "status", "category", "amount", "currency", "firstBillingDate",
                                         "cancellationDate", "billingCycle", "memo", "createdAt", "updatedAt"])
            let id = try #require((object["id"] as? String).flatMap(UUID.init(uuidString:)))
            let s = try #require(subscriptions[id])
            subscriptionIDs.insert(object["id"] as! String)
            #expect(object["name"] as? String == s.name)
            #expect(object["status"] as? String == s.status.rawValue)
            #expect(s.category.map { object["category"] as? String == $0 } ?? (object["category"] is NSNull))
            #expect((object["amount"] as? NSNumber)?.doubleValue == NSDecimalNumber(decimal: s.amount).doubleValue)
            #expect(object["currency"] as? String == s.currency)
            #expect(object["firstBillingDate"] as? String == s.firstBillingDate.description)
            #expect(s.cancellationDate.map { object["cancellationDate"] as? String == $0.description }
                    ?? (object["cancellationDate"] is NSNull))
            #expect(s.memo.map { object["memo"] as? String == $0 } ?? (object["memo"] is NSNull))
            let cycle = try #require(object["billingCycle"] as? [String: Any])
            #expect(cycle["type"] as? String == s.billingCycle.type.rawValue)
            #expect(cycle["interval"] as? Int == s.billingCycle.interval)
            #expect(cycle["customDaysInterval"] as? Int == s.billingCycle.customDaysInterval)
            #expect((object["createdAt"] as? String).flatMap(ISO8601DateFormatter().date(from:)) == s.createdAt)
            #expect((object["updatedAt"] as? String).flatMap(ISO8601DateFormatter().date(from:)) == s.updatedAt)
        }

        let jsonEvents = try #require(root["billingEvents"] as? [[String: Any]])
        #expect(jsonEvents.count == events.count)
        for object in jsonEvents {
            #expect(Set(object.keys) == ["id", "subscriptionId", "billedAt", "amount", "currency", "eventType",
                                         "isAmountOverridden", "memo", "createdAt", "updatedAt"])
            let id = try #require((object["id"] as? String).flatMap(UUID.init(uuidString:)))
            let e = try #require(events.first { $0.id == id })
            // Linked to a subscription of the same export by its id.
            #expect(subscriptionIDs.contains(object["subscriptionId"] as? String ?? ""))
            #expect(object["subscriptionId"] as? String == e.subscriptionId.uuidString.lowercased())
            #expect(object["billedAt"] as? String == e.billedAt.description)
            #expect((object["billedAt"] as? String)?.wholeMatch(of: /\d{4}-\d{2}-\d{2}/) != nil)
            #expect((object["amount"] as? NSNumber)?.doubleValue == NSDecimalNumber(decimal: e.amount).doubleValue)
            #expect(object["currency"] as? String == e.currency)
            #expect(object["eventType"] as? String == e.eventType.rawValue)
            #expect(object["isAmountOverridden"] as? Bool == e.isAmountOverridden)
            #expect(e.memo.map { object["memo"] as? String == $0 } ?? (object["memo"] is NSNull))
            #expect((object["createdAt"] as? String).flatMap(ISO8601DateFormatter().date(from:)) == e.createdAt)
            #expect((object["updatedAt"] as? String).flatMap(ISO8601DateFormatter().date(from:)) == e.updatedAt)
        }
    }

    @Test func anEmptyStoreExportsEmptyListsAndAHeaderOnlyCSV() throws {
        let tracker = try SubscriptionStore(store: dir.store())
        let export = SubscriptionExport(tracker: tracker, timeZone: TimeZone(identifier: "UTC")!,
                                        clock: { Date(timeIntervalSince1970: 0) })
        let (json, csv) = try export.files()
        #expect(json.name == "subscriptions_export_19700101_000000.json")
        #expect(json.text == """
            {
              "schemaVersion": "1.0",
              "exportedAt": "1970-01-01T00:00:00+00:00",
              "settings": {
                "timezone": "GMT",
                "historyRange": {"pastMonths": 6, "futureMonths": 12}
              },
              "subscriptions": [],
              "billingEvents": []
            }

            """)
        #expect(csv.text == SubscriptionExport.csvHeaders.joined(separator: ",") + "\r\n")
    }

    @Test func billedInLimitsTheEventsButNotTheSubscriptions() throws {
        var (_, export) = try populated()
        export.billedIn = LogicalDay(year: 2026, month: 2, day: 1)!...LogicalDay(year: 2026, month: 2, day: 28)!
        let content = try export.tracker.store.read { tx in try export.content(in: tx) }
        #expect(content.subscriptions.count == 6)
        #expect(content.billingEvents.map(\.billedAt.description)
                == ["2026-02-13", "2026-02-15", "2026-02-20", "2026-02-28", "2026-02-28"])
    }

    @Test func anEventWhoseSubscriptionIsMissingKeepsItsLine() throws {
        let (tracker, export) = try populated()
        // Plant an orphan, as a buggy writer in another process might.
        let orphan = BillingEvent(id: UUID(uuidString: "e5000000-0000-4000-8000-000000000001")!,
                                  subscriptionId: UUID(uuidString: "e5000000-0000-4000-8000-0000000000ff")!,
                                  billedAt: LogicalDay(year: 2026, month: 1, day: 1)!, amount: 1, currency: "JPY",
                                  createdAt: SubscriptionSampleData.generatedAt, updatedAt: SubscriptionSampleData.generatedAt)
        try tracker.billingEvents.put(orphan, forKey: orphan.id)
        let csv = try tracker.store.read { tx in try export.csv(in: tx) }
        #expect(csv.contains("\r\ne5000000-0000-4000-8000-000000000001,e5000000-0000-4000-8000-0000000000ff,,,,2026-01-01,1,JPY,projected,false,\r\n"))
    }
}
