import KVStore

/// A sum of `Double`s kept exactly, in fixed point (units of 2⁻⁵², in an `Int128`), so that any grouping
/// of the same values gives the same bits: a year summed day by day equals the same year summed month
/// by month and then across months. Exact for every value that is a multiple of 2⁻⁵² (every `Double`
/// from 1 up, such as a category average of 1-to-5 scores); smaller fractions are truncated to 2⁻⁵².
/// Values beyond ±2⁷⁰ are clamped, and the sum wraps rather than traps, so a corrupt summary written
/// by another process cannot crash a reader.
public struct ExactSum: BitwiseCopyable, Hashable, Sendable {
    /// The sum in units of 2⁻⁵².
    public private(set) var units: Int128 = 0

    public init() {}

    @inline(__always)
    public mutating func add(_ value: Double) {
        // Truncated toward zero (exact for every multiple of 2⁻⁵²). Below 2⁶², one conversion
        // instruction to Int64; the rest (and NaN, for which the comparison is false) take the slow path.
        let scaled = value * 0x1p52
        if abs(scaled) < 0x1p62 {
            units &+= Int128(Int64(scaled))
        } else {
            addLarge(scaled)
        }
    }

    @inline(never)
    private mutating func addLarge(_ scaled: Double) {
        guard !scaled.isNaN else { return }
        units &+= Int128(max(-0x1p122, min(0x1p122, scaled)))
    }

    @inline(__always)
    public mutating func add(_ other: ExactSum) { units &+= other.units }

    /// The sum as a `Double`: rounded once while it fits in 63 bits (a year of values up to 5), else
    /// from its two halves. Either way the same units give the same bits.
    public var value: Double {
        // Double(Int128) is a generic conversion in the standard library (about 900 instructions).
        if let small = Int64(exactly: units) { return Double(small) * 0x1p-52 }
        let high = Int64(truncatingIfNeeded: units >> 64), low = UInt64(truncatingIfNeeded: units)
        return (Double(high) * 0x1p64 + Double(low)) * 0x1p-52
    }
}

/// What the dashboard needs of one month of ``DailySummary``s: record count, the sums and counts of each
/// category's averages, and the runs of consecutive days at its ends and within it (for the streak).
/// The checklist keeps one per month in `checklistMonths`, an ``Aggregation`` of `dailySummaries`
/// maintained in every write, so that the year dashboard reads a dozen months instead of 365 days.
///
/// 128 bytes of plain numbers with no padding, stored with ``FixedLayoutCodec``.
public struct ChecklistMonth: BitwiseCopyable, Hashable, Sendable {
    /// The records (days) of the month.
    public var records: Int32 = 0
    /// The first and last day with a record.
    public var firstDay: Int32 = 0
    public var lastDay: Int32 = 0
    /// The run of consecutive days that starts at ``firstDay``, the one that ends at ``lastDay``, and the
    /// longest one.
    public var leadingRun: Int32 = 0
    public var trailingRun: Int32 = 0
    public var longestRun: Int32 = 0
    /// Per category, in ``ChecklistCategory`` order: how many records have an average for it.
    public var perceiveCount: Int32 = 0
    public var thinkCount: Int32 = 0
    public var executeCount: Int32 = 0
    public var engageCount: Int32 = 0
    public var sustainCount: Int32 = 0
    /// Unused; keeps the layout free of padding (every byte is written, so equal months have equal bytes).
    public var reserved: Int32 = 0
    /// Per category: the exact sum of the records' averages.
    public var perceiveSum = ExactSum()
    public var thinkSum = ExactSum()
    public var executeSum = ExactSum()
    public var engageSum = ExactSum()
    public var sustainSum = ExactSum()

    public init() {}

    /// Adds the summary of `day`, which comes after every day added before.
    public mutating func add(_ summary: DailySummary, on day: LogicalDay) {
        let d = day.dayNumber
        if records == 0 {
            firstDay = d
            leadingRun = 1
            trailingRun = 1
        } else if Int(d) == Int(lastDay) + 1 {
            if Int(leadingRun) == Int(lastDay) - Int(firstDay) + 1 { leadingRun &+= 1 }
            trailingRun &+= 1
        } else {
            trailingRun = 1
        }
        lastDay = d
        longestRun = max(longestRun, trailingRun)
        records &+= 1
        var day = CategoryTotals()
        day.add(summary)
        for category in ChecklistCategory.allCases { self[category].add(day[category]) }
    }

    /// The sums of one category.
    public subscript(_ category: ChecklistCategory) -> CategorySums {
        get {
            switch category {
            case .perceive: CategorySums(sum: perceiveSum, count: Int(perceiveCount))
            case .think: CategorySums(sum: thinkSum, count: Int(thinkCount))
            case .execute: CategorySums(sum: executeSum, count: Int(executeCount))
            case .engage: CategorySums(sum: engageSum, count: Int(engageCount))
            case .sustain: CategorySums(sum: sustainSum, count: Int(sustainCount))
            }
        }
        set {
            let count = Int32(truncatingIfNeeded: newValue.count)
            switch category {
            case .perceive: (perceiveSum, perceiveCount) = (newValue.sum, count)
            case .think: (thinkSum, thinkCount) = (newValue.sum, count)
            case .execute: (executeSum, executeCount) = (newValue.sum, count)
            case .engage: (engageSum, engageCount) = (newValue.sum, count)
            case .sustain: (sustainSum, sustainCount) = (newValue.sum, count)
            }
        }
    }

    public static func == (a: ChecklistMonth, b: ChecklistMonth) -> Bool {
        withUnsafeBytes(of: a) { x in withUnsafeBytes(of: b) { y in x.elementsEqual(y) } }
    }

    public func hash(into hasher: inout Hasher) {
        withUnsafeBytes(of: self) { hasher.combine(bytes: $0) }
    }
}

/// The sum and count of one category's averages over a run of records.
public struct CategorySums: Hashable, Sendable {
    public var sum = ExactSum()
    public var count = 0

    public init(sum: ExactSum = ExactSum(), count: Int = 0) {
        self.sum = sum
        self.count = count
    }

    /// Adds `value` unless it is NaN (a summary's absent average).
    @inline(__always)
    public mutating func add(unlessNaN value: Double) {
        if !value.isNaN { sum.add(value); count += 1 }
    }

    @inline(__always)
    public mutating func add(_ other: CategorySums) {
        sum.add(other.sum)
        count += other.count
    }

    /// The mean, or `nil` without values.
    public var mean: Double? { count == 0 ? nil : sum.value / Double(count) }
}

/// The sums of every category, in one pass over the summaries.
struct CategoryTotals {
    var perceive = CategorySums(), think = CategorySums(), execute = CategorySums(), engage = CategorySums(), sustain = CategorySums()

    @inline(__always)
    mutating func add(_ summary: DailySummary) {
        perceive.add(unlessNaN: summary.perceive)
        think.add(unlessNaN: summary.think)
        execute.add(unlessNaN: summary.execute)
        engage.add(unlessNaN: summary.engage)
        sustain.add(unlessNaN: summary.sustain)
    }

    mutating func add(_ month: ChecklistMonth) {
        for category in ChecklistCategory.allCases { self[category].add(month[category]) }
    }

    subscript(_ category: ChecklistCategory) -> CategorySums {
        get {
            switch category {
            case .perceive: perceive
            case .think: think
            case .execute: execute
            case .engage: engage
            case .sustain: sustain
            }
        }
        set {
            switch category {
            case .perceive: perceive = newValue
            case .think: think = newValue
            case .execute: execute = newValue
            case .engage: engage = newValue
            case .sustain: sustain = newValue
            }
        }
    }
}

/// Runs of consecutive days merged month by month, in day order: the streak from the months alone.
struct RunsAccumulator {
    private var lastDay: Int?
    private var trailing = 0
    private var longest = 0

    mutating func add(_ month: ChecklistMonth) {
        guard month.records > 0 else { return }
        let joined = lastDay.map { Int(month.firstDay) == $0 + 1 } ?? false
        let spansWhole = Int(month.leadingRun) == Int(month.lastDay) - Int(month.firstDay) + 1
        let leadingTotal = joined ? trailing + Int(month.leadingRun) : Int(month.leadingRun)
        longest = max(longest, Int(month.longestRun), leadingTotal)
        trailing = spansWhole ? leadingTotal : Int(month.trailingRun)
        lastDay = Int(month.lastDay)
    }

    var streak: Streak { Streak(current: trailing, longest: longest) }
}
