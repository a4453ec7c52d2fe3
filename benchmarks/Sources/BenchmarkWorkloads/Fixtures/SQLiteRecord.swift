import GRDB
import Workloads

/// The checklist as a GRDB user would store it: one row per day, scores and memos as JSON, the cache
/// fields as columns.
struct SQLiteRecord: Codable, FetchableRecord, PersistableRecord {
    static let databaseTableName = "dailyRecord"
    var day: Int32
    var scores: [String: Int]
    var memos: [String: String]
    var perceive: Double?
    var think: Double?
    var execute: Double?
    var engage: Double?
    var sustain: Double?
    var totalAverage: Double
    var inputCount: Int

    init(_ record: DailyRecord) {
        day = record.day.dayNumber
        scores = record.scores
        memos = record.memos
        perceive = record.cachedCategoryAverages["perceive"]
        think = record.cachedCategoryAverages["think"]
        execute = record.cachedCategoryAverages["execute"]
        engage = record.cachedCategoryAverages["engage"]
        sustain = record.cachedCategoryAverages["sustain"]
        totalAverage = record.cachedTotalAverage
        inputCount = record.cachedInputCount
    }
}
