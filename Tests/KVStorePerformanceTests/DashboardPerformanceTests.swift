import Foundation
import KVStore
import Testing
import TestSupport
import Workloads

/// The dashboard over the one-year dataset of `DESIGN.md`, timed and printed; each timed result is
/// checked against ``DashboardReference``, computed from the full records in memory.
@Suite(.serialized) struct DashboardPerformanceTests {
    let dir = TemporaryDirectory()

    /// p50 and p90 in microseconds of `iterations` runs of `body`.
    static func percentiles(_ iterations: Int, _ body: () throws -> Void) rethrows -> (p50: Double, p90: Double) {
        let clock = ContinuousClock()
        var samples: [Double] = []
        samples.reserveCapacity(iterations)
        for _ in 0..<iterations {
            let start = clock.now
            try body()
            let (seconds, attoseconds) = (clock.now - start).components
            samples.append(Double(seconds) * 1e6 + Double(attoseconds) / 1e12)
        }
        samples.sort()
        return (samples[samples.count / 2], samples[min(samples.count - 1, samples.count * 9 / 10)])
    }

    @Test func theDashboardOverOneYear() throws {
        let records = ChecklistDataset.records()
        let container = try dir.container("group.com.example.dashboard")
        let checklist = try ChecklistStore(store: container.store)
        try container.store.write { tx in
            for record in records { try checklist.records.put(record, forKey: record.day, in: tx) }
        }
        let today = ChecklistDataset.today
        let reference = DashboardReference.dashboard(records, today: today)
        let iterations = PointOperationsPerformanceTests.buildMode == "debug" ? 200 : 2_000
        var rows: [(String, (p50: Double, p90: Double))] = []

        for period in DashboardPeriod.allCases {
            var result: Dashboard?
            let timing = try Self.percentiles(iterations) {
                result = try container.store.read { tx in try checklist.dashboard([period], today: today, in: tx) }
            }
            expectPeriod(result?[period], equals: reference[period])
            rows.append(("dashboard, \(period.rawValue) (own read transaction)", timing))
        }
        var all: Dashboard?
        rows.append(("dashboard, all five periods + streak", try Self.percentiles(iterations) {
            all = try container.store.read { tx in try checklist.dashboard(today: today, in: tx) }
        }))
        #expect(all?.streak == reference.streak)
        for period in DashboardPeriod.allCases { expectPeriod(all?[period], equals: reference[period]) }

        var decoded = 0
        rows.append(("the year's full records fetched and decoded (CBOR)", try Self.percentiles(max(10, iterations / 20)) {
            decoded = try checklist.records.entries((today - 364)...today).count
        }))
        #expect(decoded == 343)

        print("checklist dashboard over one year, 343 records (\(PointOperationsPerformanceTests.buildMode) build, \(ProcessInfo.processInfo.activeProcessorCount) cores):")
        for (name, timing) in rows {
            print("  \(name.padding(toLength: 54, withPad: " ", startingAt: 0))p50 \(String(format: "%9.1f", timing.p50)) µs   p90 \(String(format: "%9.1f", timing.p90)) µs")
        }
    }
}

/// One period checked against the reference: counts and trends exactly, averages within rounding.
func expectPeriod(_ result: DashboardPeriodResult?, equals reference: DashboardPeriodResult?) {
    guard let result, let reference else {
        Issue.record("missing period")
        return
    }
    #expect(result.records == reference.records)
    #expect(result.trends == reference.trends)
    #expect(result.categoryAverages.keys.sorted { $0.rawValue < $1.rawValue } == reference.categoryAverages.keys.sorted { $0.rawValue < $1.rawValue })
    for (category, value) in result.categoryAverages {
        #expect(abs(value - (reference.categoryAverages[category] ?? .nan)) < 1e-12, "\(result.period) \(category)")
    }
}
