import KVStore
import SyncKit
import Workloads

/// Saving in KVStore as the app does: record + derived summary + history, one transaction, into a store
/// already holding the year. One per durability, made once per process and kept open.
struct KVStoreSaver: Sendable {
    private static let durable = Result { try KVStoreSaver(durability: .durable, history: true) }
    private static let noMetaSync = Result { try KVStoreSaver(durability: .noMetaSync, history: true) }
    private static let durableWithoutHistory = Result { try KVStoreSaver(durability: .durable, history: false) }
    private static let noMetaSyncWithoutHistory = Result { try KVStoreSaver(durability: .noMetaSync, history: false) }
    static func shared(_ durability: Durability) throws -> KVStoreSaver {
        try (durability == .durable ? durable : noMetaSync).get()
    }
    /// The same saver with no history attached: record, summary and month only, the work the raw peer
    /// does, so that what history costs a save shows apart.
    static func withoutHistory(_ durability: Durability) throws -> KVStoreSaver {
        try (durability == .durable ? durableWithoutHistory : noMetaSyncWithoutHistory).get()
    }

    private static let durableWithoutNotification = Result { try KVStoreSaver(durability: .durable, history: true, notifying: false) }
    /// The durable saver with history attached but no change notifier: what posting costs a save shows
    /// apart (the app's history posts `Notify/changes` after every commit).
    static func withoutNotification() throws -> KVStoreSaver { try durableWithoutNotification.get() }

    let store: Store
    let checklist: ChecklistStore

    private init(durability: Durability, history: Bool, notifying: Bool = true) throws {
        var options = SharedContainer.Options()
        options.store.durability = durability
        let container = try SharedContainer(groupIdentifier: "group.com.example.save", root: try Dataset.temporaryDirectory("save"), options: options)
        store = container.store
        if history && !notifying {
            let history = try History.attach(to: container.store)
            checklist = try ChecklistStore(store: container.store)
            try history.enable(.collection(checklist.records.name))
        } else {
            checklist = history ? try ChecklistWidgetFlow.App(container: container).checklist : try ChecklistStore(store: container.store)
        }
        let checklist = self.checklist
        try store.write { tx in for r in Dataset.records { try checklist.records.put(r, forKey: r.day, in: tx) } }
    }

    func save(_ record: DailyRecord) throws {
        try store.write(author: "app") { tx in try checklist.records.put(record, forKey: record.day, in: tx) }
    }
}
