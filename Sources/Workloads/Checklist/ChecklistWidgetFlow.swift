import Foundation
import KVStore
import SyncKit

/// The checklist app and its widget sharing one container (seed `004_…`): the app saves records with
/// history, publishes the widget feed and wakes the widgets; a widget wakes, reads the feed (never the
/// store) and shows it. `kvtool demo` runs both sides in separate processes.
public enum ChecklistWidgetFlow {
    /// The app side: the checklist collections with history enabled on the records, and the feed.
    public struct App: Sendable {
        public let container: SharedContainer
        public let history: History
        public let checklist: ChecklistStore
        public let feed: WidgetFeed<ChecklistWidgetFeed>

        /// Opens the app's side of `container` (attaching history, enabling it for `dailyRecords`).
        public init(container: SharedContainer) throws {
            self.container = container
            history = try History.attach(to: container)
            checklist = try ChecklistStore(store: container.store)
            try history.enable(.collection(checklist.records.name))
            feed = try WidgetFeed(name: ChecklistWidgetFeed.feedName, container: container)
        }

        /// Saves `records` in one transaction, then publishes the feed for `today` and wakes widgets.
        /// Returns the feed's new generation.
        @discardableResult
        public func save(_ records: [DailyRecord], today: LogicalDay = ChecklistDataset.today, author: String = "app") throws -> UInt64 {
            try container.store.write(author: author) { tx in
                for record in records { try checklist.records.put(record, forKey: record.day, in: tx) }
            }
            return try publish(today: today)
        }

        /// Publishes the feed built from the store as it is now, then posts the change notification so
        /// that widgets woken by the commit also see the new feed.
        @discardableResult
        public func publish(today: LogicalDay = ChecklistDataset.today) throws -> UInt64 {
            let generation = try feed.publish(try ChecklistWidgetFeed.build(from: checklist, today: today))
            try history.notifier?.post()
            return generation
        }
    }

    /// One line for people: what a widget shows.
    public static func summary(_ published: PublishedFeed<ChecklistWidgetFeed>) -> String {
        let payload = published.payload
        var parts = ["feed generation \(published.generation) (store txn \(payload.sourceTransactionID))",
                     "today \(payload.day)"]
        if let total = payload.totalAverage {
            parts.append("total \(String(format: "%.2f", total))")
            parts.append(ChecklistCategory.allCases.compactMap { category in
                payload.categoryAverages[category.rawValue].map { "\(category.rawValue) \(String(format: "%.1f", $0))" }
            }.joined(separator: " "))
        } else {
            parts.append("no record today")
        }
        parts.append("streak \(payload.streak.current) (longest \(payload.streak.longest))")
        if let message = payload.latestMessage {
            let text = message.text.count > 12 ? String(message.text.prefix(12)) + "…" : message.text
            parts.append("latest message \"\(text)\" (\(message.category.rawValue), \(message.day))")
        }
        return parts.joined(separator: ", ")
    }
}
