import GRDB
import KVStore
import Workloads

extension BenchmarkWorkload {
    /// The dashboard of each period, and of all five at once, read from the year's summaries: KVStore,
    /// GRDB (a range query over the cache columns) and raw LMDB (the floor). Each computes the
    /// periods with the same code (`DashboardPeriodResult(_:summaries:)`).
    static let dashboard: [BenchmarkWorkload] = {
        let today = Dataset.today
        let cases = DashboardPeriod.allCases.map { ($0.rawValue, [$0]) } + [("all five periods", DashboardPeriod.allCases)]
        return cases.flatMap { label, periods in [
            BenchmarkWorkload("Dashboard \(label)", "KVStore") {
                let fixture = try KVStoreFixture.shared()
                let (store, checklist) = (fixture.store, fixture.checklist)
                return { sink(try store.read { tx in try checklist.dashboard(periods, today: today, in: tx) }) }
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
