import KVStore

/// Runs of consecutive days with a record, as `DESIGN.md` defines them for the dashboard and the
/// widget: over all records, ``longest`` is the longest run of consecutive days, and ``current`` is
/// the length of the run that ends at the most recent record (whether or not that record is today's).
///
/// ```swift
/// let streak = Streak(days: [day, day + 1, day + 2, day + 5])   // current 1, longest 3
/// let stored = try store.read { tx in try checklist.streak(in: tx) }
/// ```
///
/// A plain value.
public struct Streak: Codable, Hashable, Sendable {
    /// The length of the run of consecutive days that ends at the most recent day; 0 without days.
    public var current: Int
    /// The length of the longest run of consecutive days; 0 without days.
    public var longest: Int

    public init(current: Int, longest: Int) {
        self.current = current
        self.longest = longest
    }

    /// The streak of a set of days, given in any order; duplicates count once.
    public init(days: some Sequence<LogicalDay>) {
        var sorted = Array(days)
        if !zip(sorted, sorted.dropFirst()).allSatisfy({ $0 < $1 }) {
            sorted = Array(Set(sorted)).sorted()
        }
        var accumulator = Accumulator()
        for day in sorted { accumulator.add(day) }
        self = accumulator.streak
    }

    /// Builds a streak from days fed in strictly increasing order, as a cursor scan yields them.
    public struct Accumulator: Sendable {
        /// The last day added, as a day number in an `Int64` (no day number overflows it by one);
        /// `Int64.min` before the first.
        private var last = Int64.min
        private var run = 0
        private var longest = 0

        public init() {}

        /// Adds the next day; it must be later than every day added before.
        public mutating func add(_ day: LogicalDay) {
            let number = Int64(day.dayNumber)
            run = number == last &+ 1 ? run + 1 : 1
            longest = max(longest, run)
            last = number
        }

        /// The streak of the days added so far.
        public var streak: Streak { Streak(current: run, longest: longest) }
    }
}
