#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore
import SyncKit

extension SubscriptionExport {
    /// The JSON export of seed §6.1, read through `transaction`, at the clock's current instant.
    public func json(in transaction: ReadTransaction) throws -> String {
        let now = clock()
        return try json(try content(in: transaction), exportedAt: now)
    }

    /// The JSON export of seed §6.1 for `content`.
    ///
    /// ```json
    /// {
    ///   "schemaVersion": "1.0",
    ///   "exportedAt": "2026-02-06T12:34:56+09:00",
    ///   "settings": {
    ///     "timezone": "Asia/Tokyo",
    ///     "historyRange": {"pastMonths": 6, "futureMonths": 12}
    ///   },
    ///   "subscriptions": [ … ],
    ///   "billingEvents": [ … ]
    /// }
    /// ```
    ///
    /// Keys are in the seed's order. A subscription has `id`, `name`, `status`, `category`, `amount`,
    /// `currency`, `firstBillingDate`, `cancellationDate`, `billingCycle` (`{"type", "interval"}`, or
    /// `{"type": "customDays", "customDaysInterval"}`), `memo`, `createdAt`, `updatedAt`; a billing
    /// event has `id`, `subscriptionId`, `billedAt`, `amount`, `currency`, `eventType`,
    /// `isAmountOverridden`, `memo`, `createdAt`, `updatedAt`. Days are `YYYY-MM-DD`; instants are ISO
    /// 8601 with the offset of ``timeZone``; amounts are exact decimal numbers (`1200`, `12.99`); an
    /// absent optional (`category`, `cancellationDate`, `memo`) is `null`, an empty memo `""`.
    ///
    /// - Throws: ``ExportError`` for a NaN amount or a date outside the years 0000-9999.
    public func json(_ content: Content, exportedAt: Date) throws -> String {
        let format = ExportTimeFormat(timeZone: timeZone)
        let subscriptions = try content.subscriptions.enumerated().map { i, s in
            try subscriptionJSON(s, format: format, path: "$.subscriptions[\(i)]")
        }
        let events = try content.billingEvents.enumerated().map { i, e in
            try eventJSON(e, format: format, path: "$.billingEvents[\(i)]")
        }
        let document: JSONValue = [
            "schemaVersion": .string(Self.schemaVersion),
            "exportedAt": .string(try format.timestamp(exportedAt)),
            "settings": [
                "timezone": .string(timeZone.identifier),
                "historyRange": [
                    "pastMonths": .number(Decimal(historyRange.pastMonths)),
                    "futureMonths": .number(Decimal(historyRange.futureMonths)),
                ],
            ],
            "subscriptions": .array(subscriptions),
            "billingEvents": .array(events),
        ]
        return try jsonWriter.render(document)
    }

    private func subscriptionJSON(_ s: Subscription, format: ExportTimeFormat, path: String) throws -> JSONValue {
        let cycle: JSONValue = switch s.billingCycle {
        case .monthly(let n), .yearly(let n):
            ["type": .string(s.billingCycle.type.rawValue), "interval": .number(Decimal(n))]
        case .customDays(let days):
            ["type": .string(s.billingCycle.type.rawValue), "customDaysInterval": .number(Decimal(days))]
        }
        return [
            "id": .string(s.id.uuidString.lowercased()),
            "name": .string(s.name),
            "status": .string(s.status.rawValue),
            "category": .string(orNull: s.category),
            "amount": .number(try Self.checked(s.amount, path: path + ".amount")),
            "currency": .string(s.currency),
            "firstBillingDate": .string(try ExportTimeFormat.day(s.firstBillingDate)),
            "cancellationDate": .string(orNull: try s.cancellationDate.map { day throws(ExportError) in try ExportTimeFormat.day(day) }),
            "billingCycle": cycle,
            "memo": .string(orNull: s.memo),
            "createdAt": .string(try format.timestamp(s.createdAt)),
            "updatedAt": .string(try format.timestamp(s.updatedAt)),
        ]
    }

    private func eventJSON(_ e: BillingEvent, format: ExportTimeFormat, path: String) throws -> JSONValue {
        [
            "id": .string(e.id.uuidString.lowercased()),
            "subscriptionId": .string(e.subscriptionId.uuidString.lowercased()),
            "billedAt": .string(try ExportTimeFormat.day(e.billedAt)),
            "amount": .number(try Self.checked(e.amount, path: path + ".amount")),
            "currency": .string(e.currency),
            "eventType": .string(e.eventType.rawValue),
            "isAmountOverridden": .bool(e.isAmountOverridden),
            "memo": .string(orNull: e.memo),
            "createdAt": .string(try format.timestamp(e.createdAt)),
            "updatedAt": .string(try format.timestamp(e.updatedAt)),
        ]
    }

    /// `amount`, or ``ExportError/notANumber(path:)`` naming where it is.
    static func checked(_ amount: Decimal, path: String) throws(ExportError) -> Decimal {
        if amount.isNaN { throw .notANumber(path: path) }
        return amount
    }
}
