// package-benchmark's runner for every workload of BenchmarkWorkloads (the dashboard path over one year
// of data, DESIGN.md's dataset, and the work around it), done by KVStore, GRDB.swift 7.10.0 on SQLite in
// WAL mode, Foundation's UserDefaults and Coders, raw C LMDB and hand-written floors, on identical data.
// Names are "<workload> · <implementation>", which scripts/bench-ratios.py pairs up.
import Benchmark
import BenchmarkWorkloads

let benchmarks: @Sendable () -> Void = {
    for workload in BenchmarkWorkload.all {
        let metrics: [BenchmarkMetric] = workload.countsMallocs ? [.wallClock, .mallocCountTotal] : [.wallClock]
        let configuration = Benchmark.Configuration(metrics: metrics, maxDuration: .seconds(2),
                                                    maxIterations: workload.maxIterations ?? Benchmark.defaultConfiguration.maxIterations)
        let prepared = PreparedOperation()
        // Setup (the fixtures, the inputs) runs once, before the first sample; each sample then times
        // the operation alone.
        Benchmark(workload.name, configuration: configuration) { benchmark in
            let operation = try prepared.operation()
            benchmark.startMeasurement()
            for _ in benchmark.scaledIterations { try operation() }
        } setup: {
            prepared.value = Result { try workload.setup() }
        }
    }
}

/// The operation a benchmark's setup made, kept for its samples.
final class PreparedOperation: @unchecked Sendable {
    var value: Result<BenchmarkWorkload.Operation, any Error>?

    func operation() throws -> BenchmarkWorkload.Operation {
        guard let value else { fatalError("the benchmark ran before its setup") }
        return try value.get()
    }
}
