#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore
import SyncKit

/// The subscription tracker's exports (seed `002_…` §6): JSON with the subscriptions and their
/// billing events (§6.1), and CSV with one line per billing event (§6.2), named
/// `subscriptions_export_YYYYMMDD_hhmmss.json` and `subscriptions_events_YYYYMMDD_hhmmss.csv` (§6.3).
///
/// ```swift
/// let export = SubscriptionExport(tracker: tracker, timeZone: TimeZone(identifier: "Asia/Tokyo")!)
/// let (json, csv) = try export.write(toDirectory: NSTemporaryDirectory())   // both from one snapshot
/// ```
///
/// **Consistent.** Everything an export contains is read in one read transaction (pass yours, or let
/// ``files()`` open one): it is one committed state of the store, whatever other threads and
/// processes commit meanwhile. JSON and CSV made by ``files(in:)`` share that state and one instant.
///
/// **Deterministic.** The instant comes from ``clock`` and is written in ``timeZone``; with both
/// fixed, the same store gives the same bytes. Subscriptions are in ID order; billing events are in
/// billing-date order, then subscription ID, then event ID, in both formats. UUIDs are written in
/// lowercase (RFC 9562).
///
/// **Formats.** See ``json(_:exportedAt:)`` and ``csv(_:)``.
public struct SubscriptionExport: Sendable {
    /// The JSON format's version (seed §6.1): raised on breaking changes.
    public static let schemaVersion = "1.0"
    /// `subscriptions_export_YYYYMMDD_hhmmss.json`.
    public static let jsonFileName = ExportFileName(prefix: "subscriptions_export_", pathExtension: "json")
    /// `subscriptions_events_YYYYMMDD_hhmmss.csv`.
    public static let csvFileName = ExportFileName(prefix: "subscriptions_events_", pathExtension: "csv")

    public let tracker: SubscriptionStore
    /// The zone of `exportedAt`, the timestamps and the file names; written as `settings.timezone`.
    public var timeZone: TimeZone
    /// Written as `settings.historyRange`.
    public var historyRange: HistoryRange
    /// When set, only billing events billed on these days are exported; all of them otherwise.
    public var billedIn: ClosedRange<LogicalDay>?
    /// The CSV line ending: CRLF (RFC 4180) by default.
    public var csvLineEnding: CSVLineEnding
    /// The JSON layout: pretty, two-space indent, short objects of scalars on one line.
    public var jsonWriter: JSONWriter
    /// The clock giving the export's instant (`exportedAt`, file names).
    public var clock: @Sendable () -> Date

    public init(tracker: SubscriptionStore, timeZone: TimeZone = .current, historyRange: HistoryRange = .standard,
                billedIn: ClosedRange<LogicalDay>? = nil, csvLineEnding: CSVLineEnding = .crlf,
                jsonWriter: JSONWriter = JSONWriter(), clock: @escaping @Sendable () -> Date = { Date() }) {
        self.tracker = tracker
        self.timeZone = timeZone
        self.historyRange = historyRange
        self.billedIn = billedIn
        self.csvLineEnding = csvLineEnding
        self.jsonWriter = jsonWriter
        self.clock = clock
    }

    /// What one export contains, as read in one transaction.
    public struct Content: Hashable, Sendable {
        /// In ID order.
        public var subscriptions: [Subscription]
        /// In billing-date order, then subscription ID, then event ID.
        public var billingEvents: [BillingEvent]

        public init(subscriptions: [Subscription], billingEvents: [BillingEvent]) {
            self.subscriptions = subscriptions
            self.billingEvents = billingEvents
        }
    }

    /// Reads the subscriptions and billing events (those in ``billedIn`` when set) through
    /// `transaction`.
    ///
    /// - Throws: a store error (a value that does not decode names its collection and key).
    public func content(in transaction: ReadTransaction) throws -> Content {
        let subscriptions = try tracker.subscriptions.entries(in: transaction).map(\.value)
        var events = try tracker.billingEvents.entries(in: transaction).map(\.value)
        if let billedIn { events.removeAll { !billedIn.contains($0.billedAt) } }
        events.sort { a, b in
            if a.billedAt != b.billedAt { return a.billedAt < b.billedAt }
            if a.subscriptionId != b.subscriptionId { return a.subscriptionId.uuidString < b.subscriptionId.uuidString }
            return a.id.uuidString < b.id.uuidString
        }
        return Content(subscriptions: subscriptions, billingEvents: events)
    }

    // MARK: - Files

    /// The JSON file, read through `transaction`, at the clock's current instant.
    public func jsonFile(in transaction: ReadTransaction) throws -> ExportFile {
        let now = clock()
        return try jsonFile(try content(in: transaction), exportedAt: now)
    }

    /// The CSV file, read through `transaction`, named for the clock's current instant.
    public func csvFile(in transaction: ReadTransaction) throws -> ExportFile {
        let now = clock()
        return try csvFile(try content(in: transaction), exportedAt: now)
    }

    /// Both files from one read of `transaction`, at one instant.
    public func files(in transaction: ReadTransaction) throws -> (json: ExportFile, csv: ExportFile) {
        let now = clock()
        let content = try content(in: transaction)
        return (try jsonFile(content, exportedAt: now), try csvFile(content, exportedAt: now))
    }

    /// Both files from one read transaction of their own.
    public func files() throws -> (json: ExportFile, csv: ExportFile) {
        try tracker.store.read { tx in try files(in: tx) }
    }

    /// Takes both files (``files()``) and writes each atomically into `directory`
    /// (``ExportFile/write(toDirectory:sharing:)``); returns their paths.
    ///
    /// - Throws: a store error; `KVStoreError.io` when the directory is missing or not writable;
    ///   ``ExportError``.
    @discardableResult
    public func write(toDirectory directory: String) throws -> (json: String, csv: String) {
        let (json, csv) = try files()
        return (try json.write(toDirectory: directory), try csv.write(toDirectory: directory))
    }

    func jsonFile(_ content: Content, exportedAt: Date) throws -> ExportFile {
        let format = ExportTimeFormat(timeZone: timeZone)
        return ExportFile(name: try Self.jsonFileName.name(at: exportedAt, format: format),
                          contents: Data(try json(content, exportedAt: exportedAt).utf8))
    }

    func csvFile(_ content: Content, exportedAt: Date) throws -> ExportFile {
        let format = ExportTimeFormat(timeZone: timeZone)
        return ExportFile(name: try Self.csvFileName.name(at: exportedAt, format: format),
                          contents: Data(try csv(content).utf8))
    }
}
