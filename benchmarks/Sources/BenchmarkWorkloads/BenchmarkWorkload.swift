/// One workload done by one implementation: what both runners measure, package-benchmark's `Dashboard`
/// (wall clock and mallocs) and `Instructions` (instructions under callgrind).
///
/// ```swift
/// for workload in BenchmarkWorkload.all where workload.name.hasPrefix("Decode") {
///     let operation = try workload.setup()   // fixtures and inputs, not measured
///     try operation()                         // one operation, measured
/// }
/// ```
///
/// Names are "<workload> · <implementation>", which `scripts/bench-ratios.py` and
/// `scripts/instructions.py` pair up by workload.
public struct BenchmarkWorkload: Sendable {
    /// One run of the measured work. Each call may differ from the last (a counter picks the key or the
    /// score to change), and whatever it computes goes to ``sink(_:)``.
    public typealias Operation = () throws -> Void

    /// What is measured, such as "Dashboard year".
    public let workload: String
    /// Who does it, such as "KVStore", "GRDB", "raw LMDB" or "floor (hand-written)".
    public let implementation: String
    /// How many operations `scripts/instructions.py` counts under callgrind: fewer for the
    /// millisecond-scale workloads, which run about 50 times slower there.
    public let instructionIterations: Int
    /// The most iterations package-benchmark runs, for workloads that grow a file as they go.
    public let maxIterations: Int?
    /// Whether package-benchmark counts mallocs (no when other threads do part of the work).
    public let countsMallocs: Bool
    /// Builds what the operation needs (the fixtures of this implementation only, made once per
    /// process and shared) and returns the operation. Not measured.
    public let setup: @Sendable () throws -> Operation

    /// "<workload> · <implementation>".
    public var name: String { "\(workload) · \(implementation)" }

    public init(_ workload: String, _ implementation: String, instructionIterations: Int = 200, maxIterations: Int? = nil,
                countsMallocs: Bool = true, setup: @escaping @Sendable () throws -> Operation) {
        self.workload = workload
        self.implementation = implementation
        self.instructionIterations = instructionIterations
        self.maxIterations = maxIterations
        self.countsMallocs = countsMallocs
        self.setup = setup
    }
}

extension BenchmarkWorkload {
    /// Every workload, grouped by workload, KVStore first.
    public static let all: [BenchmarkWorkload] =
        dashboard + yearOfRecords + defaults + saves + notifications + codec

    /// The workload named "<workload> · <implementation>", if any.
    public static func named(_ name: String) -> BenchmarkWorkload? {
        all.first { $0.name == name }
    }
}

/// Takes a value so that the optimizer cannot drop the work that made it: neither inlined nor
/// optimized, the call and its argument stay.
@inline(never)
@_optimize(none)
public func sink<T>(_ value: T) {}
