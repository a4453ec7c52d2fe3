#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore
import SyncKit

/// The checklist app and its widget sharing one container (seed `004_…`): the app saves records with
/// history, publishes the widget feed and wakes the widgets; a widget wakes, reads the feed (never the
/// store) and shows it. `kvtool demo` runs both sides in separate processes.
public enum ChecklistWidgetFlow {
    /// The container the demo's processes share when no group is given.
    public static let defaultGroup = TrainerNotificationFlow.defaultGroup

    /// The widget side: the feed, read without opening the store, and the year dashboard, computed
    /// from the store's month aggregates in a read-only open (made on first use, not at start-up).
    public struct Widget: Sendable {
        public let layout: ContainerLayout
        public let feed: WidgetFeed<ChecklistWidgetFeed>

        /// Resolves the container's paths; nothing is opened or created.
        public init(groupIdentifier: GroupIdentifier, root: String? = nil) throws {
            layout = try ContainerLayout(groupIdentifier: groupIdentifier, root: root)
            // The payload read by hand (CBORDecoder for anything else): see `decodeEncodedCBOR`.
            feed = try WidgetFeed(name: ChecklistWidgetFeed.feedName, snapshotsDirectory: layout.snapshots,
                                  payloadDecoder: { ChecklistWidgetFeed.decodeEncodedCBOR($0) })
        }

        /// Waits until a feed newer than generation `after` is published, woken by the app's change
        /// notifications; returns it and how many notifications woke this process. `ready` runs once
        /// the subscription is in place: a post made after it is never missed.
        ///
        /// - Throws: ``ChecklistWidgetError/noNewFeed(after:timeout:)`` when nothing newer is published
        ///   within `timeout`.
        public func waitForFeed(after: UInt64, timeout: Duration, ready: () -> Void = {}) throws -> (PublishedFeed<ChecklistWidgetFeed>, wakes: Int) {
            let changes = try ChangeNotifier(directory: layout.notify).subscribe()
            ready()
            let clock = ContinuousClock()
            let deadline = clock.now + timeout
            var wakes = 0
            while true {
                // A feed published before the subscription began is seen here, not waited for.
                if let published = try feed.readIfPublished(), published.generation > after { return (published, wakes) }
                let left = deadline - clock.now
                guard left > .zero, changes.wait(timeout: left) else {
                    throw ChecklistWidgetError.noNewFeed(after: after, timeout: timeout)
                }
                wakes += 1
            }
        }

        /// The year's dashboard ending `today`, from the month aggregates (one short read transaction
        /// in a read-only open of the store).
        public func yearDashboard(today: LogicalDay) throws -> DashboardPeriodResult {
            try yearDashboard(today: today, in: try openStore())
        }

        /// The container opened read-only, as ``yearDashboard(today:)`` opens it.
        public func openStore() throws -> SharedContainer {
            var options = SharedContainer.Options()
            options.readOnly = true
            return try SharedContainer(groupIdentifier: layout.groupIdentifier.rawValue, root: layout.root, options: options)
        }

        /// The year's dashboard ending `today`, read from `container` (one opened by ``openStore()``).
        public func yearDashboard(today: LogicalDay, in container: SharedContainer) throws -> DashboardPeriodResult {
            // The summaries and the months only: the dashboard reads nothing else.
            let derived = try ChecklistSummaries(store: container.store)
            let dashboard = try container.store.read { tx in try derived.dashboard([.year], today: today, in: tx) }
            guard let year = dashboard[.year] else { throw ChecklistWidgetError.noYear }
            return year
        }
    }

    /// One line for people: the year's record count, and each category's average and trend.
    public static func yearLine(_ year: DashboardPeriodResult) -> String {
        let categories = ChecklistCategory.allCases.compactMap { category -> String? in
            guard let average = year.categoryAverages[category] else { return nil }
            let arrow = switch year.trends[category] { case .rising?: "↑"; case .falling?: "↓"; default: "→" }
            return "\(category.rawValue) \(fixed(average, digits: 2)) \(arrow)"
        }
        return "year dashboard: \(year.records) records" + (categories.isEmpty ? "" : ", " + join(categories, ", "))
    }
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

    /// `value` with `digits` decimals, rounded half to even, as `%.*f` writes it for these averages.
    static func fixed(_ value: Double, digits: Int) -> String {
        guard value.isFinite else { return value.description }
        var scale = 1.0
        for _ in 0..<digits { scale *= 10 }
        let scaled = (abs(value) * scale).rounded(.toNearestOrEven)
        guard scaled < 9e15 else { return value.description }
        let units = UInt64(scaled), whole = units / UInt64(scale), fraction = String(units % UInt64(scale))
        let sign = value < 0 && units > 0 ? "-" : ""
        guard digits > 0 else { return sign + String(whole) }
        return sign + String(whole) + "." + String(repeating: "0", count: digits - fraction.count) + fraction
    }

    /// One line for people: what a widget shows.
    public static func summary(_ published: PublishedFeed<ChecklistWidgetFeed>) -> String {
        let payload = published.payload
        var parts = ["feed generation \(published.generation) (store txn \(payload.sourceTransactionID))",
                     "today \(payload.day)"]
        if let total = payload.totalAverage {
            parts.append("total \(Self.fixed(total, digits: 2))")
            parts.append(join(ChecklistCategory.allCases.compactMap { category in
                payload.categoryAverages[category.rawValue].map { "\(category.rawValue) \(Self.fixed($0, digits: 1))" }
            }, " "))
        } else {
            parts.append("no record today")
        }
        parts.append("streak \(payload.streak.current) (longest \(payload.streak.longest))")
        if let message = payload.latestMessage {
            let text = message.text.count > 12 ? String(message.text.prefix(12)) + "…" : message.text
            parts.append("latest message \"\(text)\" (\(message.category.rawValue), \(message.day))")
        }
        return join(parts, ", ")
    }

    /// `parts.joined(separator: separator)`, concatenated here: the standard library's `joined` is not
    /// specialised for `[String]`, and its first call looks up `Array`'s conformance to `Collection` by
    /// scanning every conformance record of the process (issue 39: 0.17M instructions of the widget's start).
    static func join(_ parts: [String], _ separator: String) -> String {
        var text = ""
        for position in parts.indices {
            if position > 0 { text += separator }
            text += parts[position]
        }
        return text
    }
}

/// Why the checklist widget shows nothing.
public enum ChecklistWidgetError: Error, CustomStringConvertible, Sendable {
    /// No feed newer than generation `after` was published within `timeout`.
    case noNewFeed(after: UInt64, timeout: Duration)
    /// The dashboard came back without its year.
    case noYear

    public var description: String {
        switch self {
        case .noNewFeed(let after, let timeout): "the widget saw no feed newer than generation \(after) within \(timeout)"
        case .noYear: "the dashboard has no year period"
        }
    }
}
