import Foundation
import KVStore
import SyncKit
#if PostgreSQL
import SyncKitPostgres
#endif
import Workloads

/// The demo's checklist app (`Workloads`), registered with kvtool as any app would be: its records
/// replicate merged by the union of the items answered, its widget feed is published again when a
/// sync brings other devices' records (kvtool stands in for the app, so this machine's widgets wake),
/// and its dashboard is the one the widget draws.
struct ChecklistApp: KVToolApp {
    let name = "checklist"

#if PostgreSQL
    func replicatedTarget(_ target: Mutation.Target, in container: SharedContainer) throws -> ReplicatedTarget? {
        guard target == .collection(ChecklistStore.recordsName) else { return nil }
        return .collection(try ChecklistStore(store: container.store).records, conflicts: .merge(DailyRecord.union))
    }
#endif

    func afterSync(in container: SharedContainer) throws -> (@Sendable (Set<Mutation.Target>?) -> KVToolNote?)? {
#if PostgreSQL
        guard try Replication.declaredTargets(in: container.store).contains(.collection(ChecklistStore.recordsName)) else { return nil }
        let feed = try ChecklistWidgetFlow.App(container: container)
        return { changed in
            if let changed, !changed.contains(.collection(ChecklistStore.recordsName)) { return nil }
            do {
                return KVToolNote(kind: "feed", message: "published the checklist widget feed, generation \(try feed.publish())")
            } catch {
                return KVToolNote(kind: "error", message: "cannot publish the checklist widget feed: \(error)")
            }
        }
#else
        nil   // (nothing syncs without the PostgreSQL trait)
#endif
    }

    /// From the same code the widget runs (`ChecklistStore.dashboard`, the month aggregates), ending on
    /// the day of the published widget feed or else the last record.
    func dashboard(of container: SharedContainer) throws -> JSONValue? {
        let store = container.store
        guard try store.catalogEntry(forCollection: ChecklistStore.recordsName) != nil else { return nil }
        let checklist = try ChecklistStore(store: store)
        let published = try? WidgetFeed<ChecklistWidgetFeed>(name: ChecklistWidgetFeed.feedName, snapshotsDirectory: container.layout.snapshots).readIfPublished()
        let result = try store.read { tx -> (LogicalDay, Int, Dashboard)? in
            let last = try checklist.records.last(in: tx)?.key
            guard let today = published?.payload.day ?? last else { return nil }
            return (today, try checklist.records.count(in: tx), try checklist.dashboard(today: today, in: tx))
        }
        guard let (today, records, dashboard) = result else {
            return ["available": false, "reason": "the checklist has no records yet"]
        }
        return [
            "available": true, "today": .string(today.description), "records": .integer(records),
            "periods": .array(dashboard.periods.map(Self.json)),
            "yearLine": .string(dashboard[.year].map(ChecklistWidgetFlow.yearLine) ?? ""),
            "streak": ["current": .integer(dashboard.streak.current), "longest": .integer(dashboard.streak.longest)],
        ]
    }

    var integrityChecks: [IntegrityCheck] { [.checklistRecords] }

    func typedValue(forCollection collection: String) -> TypedValue? {
        collection == ChecklistStore.recordsName ? .of(DailyRecord.self) : nil
    }

    var typedCollections: [String] { [ChecklistStore.recordsName] }
    /// The records' summaries and month aggregates are derived from them, in the app's transaction.
    var collectionsOnlyTheAppWrites: Set<String> { [ChecklistStore.recordsName] }

    static func json(_ period: DashboardPeriodResult) -> JSONValue {
        ["period": .string(period.period.rawValue), "days": .integer(period.period.days), "records": .integer(period.records),
         "categories": .array(ChecklistCategory.allCases.map { category in
             ["category": .string(category.rawValue), "average": period.categoryAverages[category].map(JSONValue.float) ?? .null,
              "trend": .string((period.trends[category] ?? .flat).rawValue)]
         })]
    }
}
