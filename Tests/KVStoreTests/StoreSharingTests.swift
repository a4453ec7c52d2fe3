import Foundation
import Testing
import TestSupport
@testable import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// Regression tests for faults the reliability suite (Tests/ReliabilityTests) found in how
/// processes share one environment.
@Suite struct StoreSharingTests {
    let dir = TemporaryDirectory()

    func container(_ group: String, interval: Duration?) throws -> SharedContainer {
        var options = SharedContainer.Options()
        options.staleReaderCheckInterval = interval
        return try dir.container(group, options: options)
    }

    /// Starts a reader that holds a read transaction, and kills it.
    func killReaderHoldingATransaction(_ group: String) throws {
        let reader = try BackgroundProcess.helper(["hold-read", dir.path, group])
        #expect(reader.waitForLine { $0 == "reading" } != nil)
        reader.kill(SIGKILL)
        reader.wait()
    }

    @Test func aLongRunningWriterClearsTheSlotsOfDeadReadersByItself() throws {
        // Without the periodic check, the dead reader's slot (which pins its snapshot, so that the
        // file grows with every commit) stays until some process opens the store.
        let off = try container("group.com.example.nocheck", interval: nil)
        let offValues = try off.store.collection("values", key: Int.self, value: Int.self)
        try killReaderHoldingATransaction("group.com.example.nocheck")
        usleep(100_000)
        try offValues.put(1, forKey: 1)
        #expect(try off.store.readerSlots().filter { !$0.processAlive }.count == 1)

        // With it, the next write after the interval clears it.
        let on = try container("group.com.example.check", interval: .milliseconds(50))
        let onValues = try on.store.collection("values", key: Int.self, value: Int.self)
        try killReaderHoldingATransaction("group.com.example.check")
        #expect(try on.store.readerSlots().filter { !$0.processAlive }.count == 1)
        usleep(100_000)
        try onValues.put(1, forKey: 1)
        #expect(try on.store.readerSlots().filter { !$0.processAlive }.isEmpty)
    }
}
