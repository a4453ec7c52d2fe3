import Foundation
import Synchronization
import KVStore
import Workloads

/// The one-year dataset (DESIGN.md's) that every implementation holds, and helpers shared by the
/// fixtures.
enum Dataset {
    static let records = ChecklistDataset.records()
    static let today = ChecklistDataset.today
    /// The record the codec workloads decode and encode: the year's first, as before the codec
    /// workloads were split (30 scores at most, memos of 8 to 15 sentences).
    static var sample: DailyRecord { records[0] }
    /// The dashboard computed the plain way, which each implementation's fixture checks itself against.
    static let reference = DashboardReference.dashboard(records, today: today)

    /// A new directory under the system's temporary directory, removed when the process exits.
    static func temporaryDirectory(_ name: String) throws -> String {
        var template = Array((NSTemporaryDirectory() + "/kvstore-bench-\(name)-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw KVStoreError.io(operation: "mkdtemp", path: name, errno: errno) }
        let directory = String(cString: made)
        temporaryDirectories.withLock { directories in
            if directories.isEmpty { atexit { Dataset.removeTemporaryDirectories() } }
            directories.append(directory)
        }
        return directory
    }

    private static let temporaryDirectories = Mutex<[String]>([])

    private static func removeTemporaryDirectories() {
        for directory in temporaryDirectories.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: directory) }
    }

    /// Stops the process if `dashboard` does not answer as ``reference`` does (same day counts, trends
    /// and streak; the averages are summed in another order, so they may differ in the last bit).
    static func check(_ dashboard: Dashboard, _ implementation: String) {
        precondition(dashboard.periods.map(\.records) == reference.periods.map(\.records)
                     && dashboard.periods.map(\.trends) == reference.periods.map(\.trends)
                     && dashboard.streak == reference.streak,
                     "\(implementation)'s dashboard differs from DashboardReference's")
    }
}
