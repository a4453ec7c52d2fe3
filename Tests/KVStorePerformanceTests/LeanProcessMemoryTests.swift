import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport
import Workloads
#if canImport(Glibc)
import Glibc
#endif

/// The push extension's peak resident set in every run, under parallel load (issue 46): at most its
/// 12 MiB budget, asserted in a release build (`make perf`, or `swift test -c release -Xswiftc
/// -enable-testing --filter LeanProcessMemoryTests`); a debug build only prints its figures. The README
/// and LeanProcesses.md quote the figures this prints.
///
/// Its peak depends on how its executable came into the page cache (the kernel maps a file's pages a
/// folio at a time, up to 2 MiB, around each page a process touches): so every round runs it in both
/// states, after the executable was read in sequentially (as a copy, a build or `cat` leaves it: large
/// folios, the worst case) and after it was dropped from the cache (read in by its own faults). Four
/// extensions run at once, beside two threads that keep both cores busy.
@Suite(.serialized) struct LeanProcessMemoryTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.lean"

    /// The budget of issue 38: iOS gives a notification service extension 24 MB; this is half of it.
    static let budgetKiB = 12 * 1024

    /// A container as the demo's: the SDK configured and a token registered, a year of checklist
    /// records with their history, the subscriptions sample, and a few hundred notifications.
    func seed() async throws {
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        let push = try PushSDKStore(container: container)
        try push.enableHistory()
        try push.saveConfiguration(try PushSampleData.configuration())
        _ = try await DeviceTokenManager(store: push, server: PushSampleData.server).registerToken(PushSampleData.deviceToken)
        let history = try History.attach(to: container)
        let checklist = try ChecklistStore(store: container.store)
        try history.enable(.collection(ChecklistStore.recordsName))
        try await container.store.write(author: "app") { tx in
            for record in ChecklistDataset.records(days: 365) { try checklist.records.put(record, forKey: record.day, in: tx) }
        }
        try SubscriptionSampleData.populate(SubscriptionStore(store: container.store))
        for index in 0..<300 {
            _ = try PushNotificationFlow.handle(apnsJSON: Data(PushSampleData.validPayload.utf8), store: push,
                                                now: Date(timeIntervalSince1970: 1_795_831_112 + Double(index)))
        }
    }

    /// Drops `path` from the page cache, then, when `reading`, reads it in sequentially.
    static func cache(_ path: String, reading: Bool) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw CocoaError(.fileReadNoSuchFile, userInfo: [NSFilePathErrorKey: path]) }
        defer { close(fd) }
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
        guard reading else { return }
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL)
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while buffer.withUnsafeMutableBytes({ read(fd, $0.baseAddress, $0.count) }) > 0 {}
    }

    @Test func thePushExtensionPeaksWithinItsBudgetInEveryRunUnderParallelLoad() async throws {
        try await seed()
        let executable = productsDirectory() + "/push-extension"
        let base = ["--root", dir.path, "--group", group, "--json"]
        // Each of the four does what the demo's does, or what make lean's does, or rejects a payload.
        let runs: [[String]] = [
            base + ["--payload", PushSampleData.validPayload, "--sync-wait", "0.2"],
            base + ["--payload", PushSampleData.validPayload],
            base + ["--payload", PushSampleData.invalidPayload],
            base + ["--payload", #"{"aps":{"alert":{"title":"Lean","body":"under load"},"sound":"default"}}"#, "--sync-wait", "0.2"],
        ]
        let busy = Locked(true)
        for _ in 0..<2 {
            Thread.detachNewThread {
                var spin: UInt64 = 0
                while busy.withLock({ $0 }) { for _ in 0..<100_000 { spin &+= 1 } }
            }
        }
        defer { busy.withLock { $0 = false } }
        let rounds = 10
        var peaks: [Int] = []
        for round in 0..<rounds {
            try Self.cache(executable, reading: round % 2 == 0)
            let results = try await withThrowingTaskGroup(of: ProcessResult.self) { tasks in
                for arguments in runs { tasks.addTask { try await offPool { try run(executable, arguments, timeout: 120) } } }
                return try await tasks.reduce(into: []) { $0.append($1) }
            }
            for result in results {
                #expect(result.status == 0, "\(result.stderr)")
                let report = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
                let peak = try #require(report?["peakResidentKiB"] as? Int, "\(result.stdout)")
                #expect(report?["recorded"] as? Bool == true, "\(result.stdout)")
                peaks.append(peak)
            }
        }
        peaks.sort()
        func mib(_ kib: Int) -> String { String(format: "%.1f", Double(kib) / 1024) }
        print("[lean] push-extension peak RSS in \(peaks.count) runs (\(StressLevel.build); 4 at once beside 2 busy threads, \(rounds) rounds, "
              + "half after the executable was read in sequentially, half after it was dropped from the page cache): "
              + "min \(mib(peaks[0])), median \(mib(peaks[peaks.count / 2])), max \(mib(peaks[peaks.count - 1])) MiB; budget \(mib(Self.budgetKiB)) MiB")
        #if !DEBUG
        #expect(peaks.allSatisfy { $0 <= Self.budgetKiB }, "peaks over the budget: \(peaks.filter { $0 > Self.budgetKiB })")
        #endif
    }
}
