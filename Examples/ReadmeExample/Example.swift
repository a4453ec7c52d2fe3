import KVStore
import SyncKit

struct DailyRecord: Codable {
    var day: LogicalDay
    var scores: [String: Int]
}

// An async context (an app's task, or main here), where `read` and `write` are the async ones:
// they run on threads of their own.
@main struct Example {
    static func main() async throws {
        // The main app.
        let container = try SharedContainer(groupIdentifier: "group.com.example.checklist")
        container.store.addObserver(CommitNotifier(notifier: ChangeNotifier(container: container)))  // wakes observers
        let records = try container.store.collection("dailyRecords", key: LogicalDay.self, value: DailyRecord.self)
        let today = LogicalDay(year: 2026, month: 11, day: 21)!
        try await container.store.write(author: "app") { tx in
            try records.put(DailyRecord(day: today, scores: ["think.1": 4]), forKey: today, in: tx)
            try container.defaults().set(today.description, forKey: "lastSaved", in: tx)
        }

        // A widget, in another process: the same container, read-only.
        var options = SharedContainer.Options()
        options.readOnly = true
        let widget = try SharedContainer(groupIdentifier: "group.com.example.checklist", options: options)
        let days = try widget.store.collection("dailyRecords", key: LogicalDay.self, value: DailyRecord.self)
        let week = try await widget.store.read { tx in try days.entries((today - 6)...today, in: tx) }
        print(try widget.defaults().string(forKey: "lastSaved") ?? "never", week.count)

        // The widget follows the app: this week's count now, then after each commit (of any process) that
        // changes it.
        let thisWeek = ValueObservation.tracking { tx in try days.entries((today - 6)...today, in: tx).count }.removeDuplicates()
        for try await count in thisWeek.values(in: widget) { print("\(count) days this week") }
    }
}
