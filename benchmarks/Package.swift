// swift-tools-version: 6.1
// The benchmarks: KVStore side by side with GRDB.swift (SQLite, WAL), Foundation's UserDefaults and raw
// C LMDB, on the same data in one run, plus hand-written floors. `make bench` times them (see benchmarks/baseline.md and the README's
// performance section); `make instructions` counts their instructions.
import PackageDescription
import struct Foundation.URL

// The root package is a path dependency, whose identity is its directory's name: whatever the clone
// is called.
let root = URL(fileURLWithPath: Context.packageDirectory).deletingLastPathComponent().lastPathComponent.lowercased()

let package = Package(
    name: "KVStoreBenchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(path: ".."),
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        // The fixtures and every workload, as a registry that both runners below read.
        .target(
            name: "BenchmarkWorkloads",
            dependencies: [
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "CLMDB", package: root),
                .product(name: "KVStore", package: root),
                .product(name: "SyncKit", package: root),
                .product(name: "Workloads", package: root),
            ]
        ),
        // package-benchmark's runner: one benchmark per registered workload (wall clock, mallocs).
        .executableTarget(
            name: "Dashboard",
            dependencies: [
                "BenchmarkWorkloads",
                .product(name: "Benchmark", package: "benchmark"),
            ],
            path: "Benchmarks/Dashboard",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
        ),
        // One workload a process, for counting its instructions under callgrind
        // (scripts/instructions.py, `make instructions`).
        .executableTarget(
            name: "Instructions",
            dependencies: ["BenchmarkWorkloads"]
        ),
    ]
)
