import GRDB
import KVStore
import Workloads

extension BenchmarkWorkload {
    /// The dashboard of each period, and of all five at once: KVStore from its month aggregates (the
    /// default path), KVStore day by day from the year's summaries, GRDB (a range query over the cache
    /// columns) and raw LMDB (the floor of the day-by-day path). The day-by-day ones compute the periods
    /// with the same code (`DashboardPeriodResult(_:summaries:)`); setup checks every one against the
    /// same result.
    static let dashboard: [BenchmarkWorkload] = {
        let today = Dataset.today
        let cases = DashboardPeriod.allCases.map { ($0.rawValue, [$0]) } + [("all five periods", DashboardPeriod.allCases)]
        return cases.flatMap { label, periods in [
            BenchmarkWorkload("Dashboard \(label)", "KVStore") {
                let fixture = try KVStoreFixture.shared()
                let (store, checklist) = (fixture.store, fixture.checklist)
                return { sink(try store.read { tx in try checklist.dashboard(periods, today: today, in: tx) }) }
            },
            BenchmarkWorkload("Dashboard \(label)", "KVStore day by day") {
                let fixture = try KVStoreFixture.shared()
                let (store, checklist) = (fixture.store, fixture.checklist)
                return { sink(try store.read { tx in try checklist.dashboardDayByDay(periods, today: today, in: tx) }) }
            },
            BenchmarkWorkload("Dashboard \(label)", "GRDB") {
                let sqlite = try SQLiteChecklist.shared()
                return { sink(try sqlite.dashboard(periods, today: today)) }
            },
            BenchmarkWorkload("Dashboard \(label)", "raw LMDB") {
                let raw = try RawLMDB.shared()
                return { sink(try raw.dashboard(periods, today: today)) }
            },
        ] }
    }()

    /// The year's 343 full records, fetched and decoded.
    static let yearOfRecords: [BenchmarkWorkload] = {
        let year = (Dataset.today - 364)...Dataset.today
        return [
            BenchmarkWorkload("Year of full records fetched and decoded", "KVStore", instructionIterations: 10) {
                let records = try KVStoreFixture.shared().checklist.records
                return { sink(try records.entries(year)) }
            },
            BenchmarkWorkload("Year of full records fetched and decoded", "GRDB", instructionIterations: 10) {
                let sqlite = try SQLiteChecklist.shared()
                return { sink(try sqlite.records(year)) }
            },
        ]
    }()
}
