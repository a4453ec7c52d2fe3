import CLMDB
import KVStore
import Workloads

extension BenchmarkWorkload {
    /// Saving today's record again and again (one score changing each time) into a store that already
    /// holds the whole year: steady-state saves, each saver built once per process and kept open.
    static let saves: [BenchmarkWorkload] = {
        let modes: [(String, Durability, String)] = [("durable", .durable, "FULL"), ("no meta sync", .noMetaSync, "NORMAL")]
        return modes.flatMap { mode, durability, synchronous in [
            BenchmarkWorkload("Save one DailyRecord, \(mode)", "KVStore", instructionIterations: 20, maxIterations: 500) {
                saving(try KVStoreSaver.shared(durability).save)
            },
            BenchmarkWorkload("Save one DailyRecord, \(mode)", "KVStore without history", instructionIterations: 20, maxIterations: 500) {
                saving(try KVStoreSaver.withoutHistory(durability).save)
            },
            BenchmarkWorkload("Save one DailyRecord, \(mode)", "GRDB", instructionIterations: 20, maxIterations: 500) {
                saving(try SQLiteChecklist.saver(synchronous: synchronous).save)
            },
            // The floor: the same bytes KVStore commits for the record and its summary (the record
            // encoded by CBOREncoder), in one transaction with the same sync flags (history aside), into
            // tables seeded with the same year.
            BenchmarkWorkload("Save one DailyRecord, \(mode)", "raw LMDB", instructionIterations: 20, maxIterations: 500) {
                let raw = try RawLMDB.saver(durability)
                let encoder = CBOREncoder()
                return saving { record in try raw.save(try encoder.encode(record), DailySummary(record), day: record.day) }
            },
        ] } + [
            BenchmarkWorkload("Save one DailyRecord, durable", "KVStore without notification", instructionIterations: 20, maxIterations: 500) {
                saving(try KVStoreSaver.withoutNotification().save)
            },
        ] + HistoryModel.allCases.map { model in
            // Designs of history in plain LMDB (issue 39): what each costs a durable save, beside the
            // raw put. Durable only: that is the save the goal is set for.
            BenchmarkWorkload("Save one DailyRecord, durable", model.rawValue, instructionIterations: 20, maxIterations: 500) {
                let raw = try RawLMDB.saver(model)
                let encoder = CBOREncoder()
                return saving { record in try raw.save(try encoder.encode(record), DailySummary(record), day: record.day, history: model) }
            }
        }
    }()

    /// The operation: change a score of the year's last record, then `save` it.
    private static func saving(_ save: @escaping (DailyRecord) throws -> Void) -> Operation {
        var record = Dataset.records[Dataset.records.count - 1]
        var i = 0
        return {
            record.scores["think.1"] = 1 + i % 5
            i += 1
            try save(record)
        }
    }
}
