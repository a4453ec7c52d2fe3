import KVStore
import SyncKit
import Workloads

/// The year in KVStore as the app saves it (records with history, summaries derived, the widget feed
/// published), built once per process by the first workload that needs it.
final class KVStoreFixture: @unchecked Sendable {
    private static let built = Result { try KVStoreFixture() }
    static func shared() throws -> KVStoreFixture { try built.get() }

    let store: Store
    let checklist: ChecklistStore

    private init() throws {
        let directory = try Dataset.temporaryDirectory("kvstore")
        let container = try SharedContainer(groupIdentifier: "group.com.example.bench", root: directory)
        store = container.store
        let app = try ChecklistWidgetFlow.App(container: container)
        checklist = app.checklist
        try app.save(Dataset.records)
        let checklist = self.checklist
        let (fromMonths, dayByDay) = try store.read { tx in
            (try checklist.dashboard(today: Dataset.today, in: tx), try checklist.dashboardDayByDay(today: Dataset.today, in: tx))
        }
        Dataset.check(fromMonths, "KVStore")
        precondition(fromMonths == dayByDay, "KVStore's dashboard from its months differs from its day-by-day one")
        try DiskSizes.record("kvstore", bytes: try store.copy(toNewFile: directory + "/compacted.mdb").size)
    }
}
