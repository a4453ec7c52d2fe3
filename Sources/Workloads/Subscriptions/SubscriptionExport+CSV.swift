#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore
import SyncKit

extension SubscriptionExport {
    /// The CSV columns of seed §6.2, in their fixed order. New columns are only ever added at the end.
    public static let csvHeaders = [
        "event_id", "subscription_id", "subscription_name", "subscription_status", "category", "billed_at",
        "amount", "currency", "event_type", "is_amount_overridden", "memo",
    ]

    /// One CSV line's data: a billing event and its subscription (`nil` if it is missing).
    public struct EventRow: Sendable {
        public var event: BillingEvent
        public var subscription: Subscription?
    }

    /// The CSV writer for seed §6.2, with ``csvLineEnding``.
    public var csvWriter: CSVWriter<EventRow> {
        CSVWriter(columns: [
            CSVColumn("event_id") { $0.event.id.uuidString.lowercased() },
            CSVColumn("subscription_id") { $0.event.subscriptionId.uuidString.lowercased() },
            CSVColumn("subscription_name") { $0.subscription?.name ?? "" },
            CSVColumn("subscription_status") { $0.subscription?.status.rawValue ?? "" },
            CSVColumn("category") { $0.subscription?.category ?? "" },
            CSVColumn("billed_at") { try ExportTimeFormat.day($0.event.billedAt) },
            CSVColumn("amount") { try DecimalText.exact($0.event.amount, path: "billing event \($0.event.id.uuidString.lowercased()) amount") },
            CSVColumn("currency") { $0.event.currency },
            CSVColumn("event_type") { $0.event.eventType.rawValue },
            CSVColumn("is_amount_overridden") { $0.event.isAmountOverridden ? "true" : "false" },
            CSVColumn("memo") { $0.event.memo ?? "" },
        ], lineEnding: csvLineEnding)
    }

    /// The CSV export of seed §6.2, read through `transaction`.
    public func csv(in transaction: ReadTransaction) throws -> String {
        try csv(try content(in: transaction))
    }

    /// The CSV export of seed §6.2 for `content`: the header line, then one line per billing event in
    /// ``Content/billingEvents`` order.
    ///
    /// ```csv
    /// event_id,subscription_id,subscription_name,subscription_status,category,billed_at,amount,currency,event_type,is_amount_overridden,memo
    /// 3f0c…,a100…0001,Netflix,active,entertainment,2026-02-28,1490,JPY,projected,false,
    /// ```
    ///
    /// Fields are quoted as RFC 4180 says (``CSVText/field(_:)``): a memo with a comma, a quote or a
    /// line break is enclosed in double quotes, its quotes doubled, its line breaks kept. Absent
    /// values (no category, no memo) are empty fields; an event whose subscription is missing keeps
    /// its line with empty subscription name, status and category. Amounts are exact; booleans are
    /// `true`/`false`. Lines end with ``csvLineEnding``.
    ///
    /// - Throws: ``ExportError`` for a NaN amount or a day outside the years 0000-9999.
    public func csv(_ content: Content) throws -> String {
        let byID = Dictionary(content.subscriptions.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        return try csvWriter.render(content.billingEvents.map { EventRow(event: $0, subscription: byID[$0.subscriptionId]) })
    }
}
