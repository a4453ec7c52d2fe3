import KVStore

/// SplitMix64, as `DESIGN.md` specifies it for the one-year dataset.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    public var state: UInt64
    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The exact one-year checklist dataset of `DESIGN.md` ("The dashboard workload").
public enum ChecklistDataset {
    /// Day index 0 is 2025-11-22.
    public static let firstDay = LogicalDay(year: 2025, month: 11, day: 22)!
    /// Day index 364, 2026-11-21.
    public static let today = LogicalDay(year: 2026, month: 11, day: 21)!
    public static let memoSentence = "今日は集中できた。明日は早起きして振り返りを行う。"

    /// The records for day indexes `0..<days` (365 for the full year: 343 records, 9,288 scores).
    public static func records(days: Int = 365) -> [DailyRecord] {
        var rng = SplitMix64(seed: 42)
        var records: [DailyRecord] = []
        for i in 0..<days {
            if i % 17 == 5 { continue }
            var scores: [String: Int] = [:]
            var memos: [String: String] = [:]
            for category in ChecklistCategory.allCases {
                for k in 1...6 {
                    let r = rng.next()
                    if r % 10 == 0 { continue }
                    scores["\(category.rawValue).\(k)"] = Int(1 + (r >> 8) % 5)
                }
                if rng.next() % 2 == 0 {
                    let reps = 8 + Int(rng.next() % 8)
                    memos[category.rawValue] = String(repeating: memoSentence, count: reps)
                }
            }
            records.append(DailyRecord(day: firstDay + i, scores: scores, memos: memos))
        }
        return records
    }
}
