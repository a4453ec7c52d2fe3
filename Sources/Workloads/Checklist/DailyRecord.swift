#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

/// The checklist's five categories (seed `004_…`), in their fixed order.
public enum ChecklistCategory: String, Codable, CaseIterable, Sendable {
    case perceive, think, execute, engage, sustain

    /// Hashes the case, not its raw String (the default for a raw-value enum), so that a dashboard's
    /// five-entry dictionaries do not hash text.
    public func hash(into hasher: inout Hasher) {
        let ordinal: UInt8 = switch self {
        case .perceive: 0
        case .think: 1
        case .execute: 2
        case .engage: 3
        case .sustain: 4
        }
        hasher.combine(ordinal)
    }
}

/// One day of the checklist: scores for up to 30 items (`"<category>.<k>"`, 1…5), memos per category,
/// and the cache fields computed on save.
public struct DailyRecord: Codable, Hashable, Sendable {
    public var day: LogicalDay
    /// Item ID → score 1…5. Unanswered items are absent.
    public var scores: [String: Int]
    /// Category → memo text.
    public var memos: [String: String]
    /// Category → mean of its answered scores; absent when none is answered.
    public var cachedCategoryAverages: [String: Double]
    /// Mean of all answered scores (0 when none).
    public var cachedTotalAverage: Double
    /// How many scores are answered.
    public var cachedInputCount: Int

    /// A record with its cache fields computed from `scores`.
    public init(day: LogicalDay, scores: [String: Int], memos: [String: String]) {
        self.day = day
        self.scores = scores
        self.memos = memos
        var sums: [String: (Int, Int)] = [:]
        for (item, score) in scores {
            let category = String(item.prefix { $0 != "." })
            sums[category, default: (0, 0)].0 += score
            sums[category, default: (0, 0)].1 += 1
        }
        cachedCategoryAverages = sums.mapValues { Double($0.0) / Double($0.1) }
        cachedInputCount = scores.count
        cachedTotalAverage = scores.isEmpty ? 0 : Double(scores.values.reduce(0, +)) / Double(scores.count)
    }
}

/// The compact summary of a ``DailyRecord`` that the dashboard scans: 56 bytes of plain numbers,
/// read straight from the memory map with ``FixedLayoutCodec``. An absent category average is NaN.
public struct DailySummary: BitwiseCopyable, Hashable, Sendable {
    public var dayNumber: Int32
    public var inputCount: Int32
    public var totalAverage: Double
    /// Category averages in ``ChecklistCategory`` order; NaN when the category has no answer.
    public var perceive: Double
    public var think: Double
    public var execute: Double
    public var engage: Double
    public var sustain: Double

    /// A summary from its fields; an absent category average is NaN.
    public init(dayNumber: Int32, inputCount: Int32, totalAverage: Double, perceive: Double, think: Double,
                execute: Double, engage: Double, sustain: Double) {
        self.dayNumber = dayNumber
        self.inputCount = inputCount
        self.totalAverage = totalAverage
        self.perceive = perceive
        self.think = think
        self.execute = execute
        self.engage = engage
        self.sustain = sustain
    }

    public init(_ record: DailyRecord) {
        dayNumber = record.day.dayNumber
        inputCount = Int32(clamping: record.cachedInputCount)
        totalAverage = record.cachedTotalAverage
        func average(_ c: ChecklistCategory) -> Double { record.cachedCategoryAverages[c.rawValue] ?? .nan }
        perceive = average(.perceive)
        think = average(.think)
        execute = average(.execute)
        engage = average(.engage)
        sustain = average(.sustain)
    }

    /// The category's average, or `nil` if it had no answer that day.
    public func average(_ category: ChecklistCategory) -> Double? {
        let value: Double = switch category {
        case .perceive: perceive
        case .think: think
        case .execute: execute
        case .engage: engage
        case .sustain: sustain
        }
        return value.isNaN ? nil : value
    }

    public static func == (a: DailySummary, b: DailySummary) -> Bool {
        withUnsafeBytes(of: a) { x in withUnsafeBytes(of: b) { y in x.elementsEqual(y) } }
    }

    public func hash(into hasher: inout Hasher) {
        withUnsafeBytes(of: self) { hasher.combine(bytes: $0) }
    }
}

extension DailyRecord {
    /// The merge of two devices' records of one day (replication's merge for the checklist): the union
    /// of the items answered. An item answered on both with different scores keeps the higher one, and
    /// a memo written on both keeps the longer (then the greater) text, so that the merge gives the
    /// same record whichever side computes it.
    public static func union(_ a: DailyRecord, _ b: DailyRecord) -> DailyRecord {
        var scores = a.scores
        for (item, score) in b.scores { scores[item] = max(scores[item] ?? score, score) }
        var memos = a.memos
        for (item, memo) in b.memos {
            if let other = memos[item], (other.count, other) >= (memo.count, memo) { continue }
            memos[item] = memo
        }
        return DailyRecord(day: a.day, scores: scores, memos: memos)
    }
}
