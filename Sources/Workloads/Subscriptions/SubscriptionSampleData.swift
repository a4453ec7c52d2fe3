#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

/// A fixed, deterministic data set for the subscription tracker, used by the tests, the export golden
/// files and the demo. Every ID, day and instant is a constant, so exporting it with
/// ``timeZone`` and ``exportedAt`` always gives the same bytes.
///
/// ```swift
/// let tracker = try SubscriptionStore(store: store)
/// try SubscriptionSampleData.populate(tracker)     // 6 subscriptions, 17 billing events
/// ```
///
/// The subscriptions, chosen for the edge cases of seed `002_…`:
/// - Netflix: monthly on the 31st from 2025-01-31 (month-end clamp), memo `""`;
/// - example.com domain: yearly from 2024-02-29 (leap day), memo with a comma;
/// - Coffee beans: every 45 days, memo with double quotes and a comma;
/// - 音楽プラス: monthly, `paused`, memo with a line feed;
/// - News Digital: monthly, `cancelled` on 2026-01-10 (a billing day), memo with quotes, a comma and
///   CRLF;
/// - Cloud Storage: every 3 months, 12.99 USD, no category and no memo (`null`).
///
/// Events are generated for ``historyRange`` around ``today`` (2025-12-06...2026-05-06) at
/// ``generatedAt``; five of them are confirmed at ``confirmedAt``, one with an overridden amount, three
/// with memos that hold a comma and a line feed, quotes and a comma, and quotes and CRLF.
public enum SubscriptionSampleData {
    /// Asia/Tokyo, the zone of every instant below.
    public static let timeZone = TimeZone(identifier: "Asia/Tokyo")!
    /// 2026-02-06, the seed's date.
    public static let today = LogicalDay(year: 2026, month: 2, day: 6)!
    /// Two months back, three ahead.
    public static let historyRange = HistoryRange(pastMonths: 2, futureMonths: 3)
    /// 2026-02-06T12:00:00+09:00: when the projected events were generated.
    public static let generatedAt = tokyo(2026, 2, 6, 12, 0, 0)
    /// 2026-02-06T12:30:00+09:00: when the confirmed events were confirmed.
    public static let confirmedAt = tokyo(2026, 2, 6, 12, 30, 0)
    /// 2026-02-06T12:34:56+09:00: the instant the golden exports are taken at.
    public static let exportedAt = tokyo(2026, 2, 6, 12, 34, 56)

    public static let netflixID = UUID(uuidString: "a1000000-0000-4000-8000-000000000001")!
    public static let domainID = UUID(uuidString: "a1000000-0000-4000-8000-000000000002")!
    public static let coffeeID = UUID(uuidString: "a1000000-0000-4000-8000-000000000003")!
    public static let musicID = UUID(uuidString: "a1000000-0000-4000-8000-000000000004")!
    public static let newsID = UUID(uuidString: "a1000000-0000-4000-8000-000000000005")!
    public static let cloudID = UUID(uuidString: "a1000000-0000-4000-8000-000000000006")!

    /// The six subscriptions, in ID order.
    public static let subscriptions: [Subscription] = [
        Subscription(
            id: netflixID, name: "Netflix", amount: 1490, currency: "JPY", status: .active,
            category: "entertainment", firstBillingDate: day(2025, 1, 31), billingCycle: .monthly(interval: 1),
            memo: "", createdAt: tokyo(2025, 1, 1, 0, 0, 0), updatedAt: tokyo(2026, 2, 1, 0, 0, 0)),
        Subscription(
            id: domainID, name: "example.com domain", amount: 1580, currency: "JPY", status: .active,
            category: "work", firstBillingDate: day(2024, 2, 29), billingCycle: .yearly(interval: 1),
            memo: "Leap-day renewal, Feb 28 when there is no Feb 29",
            createdAt: tokyo(2024, 2, 20, 9, 15, 0), updatedAt: tokyo(2024, 2, 20, 9, 15, 0)),
        Subscription(
            id: coffeeID, name: "Coffee beans", amount: 2480, currency: "JPY", status: .active,
            category: "food", firstBillingDate: day(2025, 10, 1), billingCycle: .customDays(days: 45),
            memo: "Beans \"Ethiopia Guji\", 200 g",
            createdAt: tokyo(2025, 9, 28, 21, 5, 30), updatedAt: tokyo(2025, 12, 1, 8, 0, 0)),
        Subscription(
            id: musicID, name: "音楽プラス", amount: 1080, currency: "JPY", status: .paused,
            category: "music", firstBillingDate: day(2025, 6, 15), billingCycle: .monthly(interval: 1),
            memo: "Paused while travelling.\nResume in May",
            createdAt: tokyo(2025, 6, 1, 10, 0, 0), updatedAt: tokyo(2026, 1, 20, 18, 45, 0)),
        Subscription(
            id: newsID, name: "News Digital", amount: 980, currency: "JPY", status: .cancelled,
            category: "news", firstBillingDate: day(2025, 3, 10), cancellationDate: day(2026, 1, 10),
            billingCycle: .monthly(interval: 1), memo: "He said \"cancel it\",\r\nso I did.",
            createdAt: tokyo(2025, 3, 1, 7, 30, 0), updatedAt: tokyo(2026, 1, 10, 22, 0, 0)),
        Subscription(
            id: cloudID, name: "Cloud Storage", amount: Decimal(string: "12.99")!, currency: "USD", status: .active,
            category: nil, firstBillingDate: day(2025, 11, 20), billingCycle: .monthly(interval: 3),
            memo: nil, createdAt: tokyo(2025, 11, 20, 23, 59, 59), updatedAt: tokyo(2025, 11, 20, 23, 59, 59)),
    ]

    /// The confirmations applied after generation: (subscription, day, overriding amount, memo).
    public static let confirmations: [(subscriptionId: UUID, billedAt: LogicalDay, amount: Decimal?, memo: String?)] = [
        (netflixID, day(2025, 12, 31), nil, "Family plan,\nshared with 2"),
        (netflixID, day(2026, 1, 31), nil, nil),
        (coffeeID, day(2025, 12, 30), 2680, "Price up, \"limited\" lot"),
        (newsID, day(2025, 12, 10), nil, nil),
        (newsID, day(2026, 1, 10), nil, "Last charge.\r\nRefund: \"none\""),
    ]

    /// The days projected events are generated for: ``historyRange`` around ``today``.
    public static var range: ClosedRange<LogicalDay> {
        // Constant inputs within the supported years: this cannot fail.
        (try? historyRange.days(around: today)) ?? today...today
    }

    /// Saves the subscriptions (generating their events) and applies the confirmations, in one write
    /// transaction.
    ///
    /// - Throws: a store error.
    public static func populate(_ tracker: SubscriptionStore, author: String? = "sample") throws {
        try tracker.store.write(author: author) { tx in
            for subscription in subscriptions {
                try tracker.save(subscription, regeneratingIn: range, now: generatedAt, in: tx)
            }
            for c in confirmations {
                let id = BillingEvent.projectedID(subscriptionId: c.subscriptionId, billedAt: c.billedAt)
                try tracker.confirmEvent(id, amount: c.amount, memo: c.memo, now: confirmedAt, in: tx)
            }
        }
    }

    private static func day(_ y: Int, _ m: Int, _ d: Int) -> LogicalDay {
        LogicalDay(year: y, month: m, day: d)!
    }

    /// The instant of a wall-clock time in Tokyo (UTC+9 all year).
    private static func tokyo(_ y: Int, _ m: Int, _ d: Int, _ h: Int, _ min: Int, _ s: Int) -> Date {
        let seconds = Int(day(y, m, d).dayNumber) * 86_400 + h * 3600 + min * 60 + s - 9 * 3600
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }
}
