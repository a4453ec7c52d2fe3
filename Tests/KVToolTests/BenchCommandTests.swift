import Foundation
import Testing
import TestSupport
import Workloads

/// `kvtool bench dashboard --json`, run as the built binary: the shape DESIGN.md gives, with results
/// that match the reference computation.
@Suite struct BenchCommandTests {
    @Test(.blockingWork) func benchDashboardPrintsTheDesignShape() throws {
        let r = try run(productsDirectory() + "/kvtool", ["bench", "dashboard", "--iterations", "3", "--json"])
        #expect(r.status == 0, "\(r.stderr)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        #expect(object["records"] as? Int == 343)
        #expect(object["scores"] as? Int == 9288)
        #expect(object["streak"] as? [String: Int] == ["current": 2, "longest": 16])
        let reference = DashboardReference.dashboard(ChecklistDataset.records(), today: ChecklistDataset.today)
        for period in DashboardPeriod.allCases {
            let entry = try #require(object[period.rawValue] as? [String: Any], "\(period)")
            #expect((entry["p50_us"] as? Double ?? -1) > 0 && (entry["p90_us"] as? Double ?? -1) >= (entry["p50_us"] as? Double ?? 0))
            let expected = try #require(reference[period])
            #expect(entry["trends"] as? [String: String] == Dictionary(uniqueKeysWithValues: expected.trends.map { ($0.key.rawValue, $0.value.rawValue) }))
            let averages = try #require(entry["categoryAverages"] as? [String: Double])
            #expect(averages.count == expected.categoryAverages.count)
            for (category, value) in expected.categoryAverages {
                #expect(abs((averages[category.rawValue] ?? .nan) - value) < 1e-9, "\(period) \(category)")
            }
        }
        #expect((object["save"] as? [String: Any])?.keys.sorted() == ["durable", "noMetaSync", "noSync"])
        #expect((object["compactedBytes"] as? Int ?? 0) > 1_000_000)
        #expect((object["coldOpen"] as? [String: Double])?["p50_us"] ?? 0 > 0)
    }

    @Test(.blockingWork) func badOptionsAreUsageErrors() throws {
        let r = try run(productsDirectory() + "/kvtool", ["bench", "dashboard", "--days", "0"])
        #expect(r.status == 64 && r.stderr.contains("--days must be 1 to 3650"))
    }
}
