import KVStore

/// The checks that need the workloads' Swift types: each recomputes the index entries and derived
/// values of its collection from every record (see ``KVStore/KVCollection/checkMaintainedData(in:maxProblems:)``).
/// `kvtool check` runs them through the apps it registers (`KVToolApp.integrityChecks`), so the tool
/// names no collection.
extension IntegrityCheck {
    /// The checklist's `dailyRecords`.
    public static let checklistRecords = IntegrityCheck(name: "dailyRecords", collections: ["dailyRecords"]) { store, limit in
        let records = try ChecklistStore(store: store).records
        return try store.read { try records.checkMaintainedData(in: $0, maxProblems: limit) }
    }

    /// The subscriptions' `billingEvents`.
    public static let billingEvents = IntegrityCheck(name: "billingEvents", collections: ["billingEvents"]) { store, limit in
        let events = try SubscriptionStore(store: store).billingEvents
        return try store.read { try events.checkMaintainedData(in: $0, maxProblems: limit) }
    }
}
