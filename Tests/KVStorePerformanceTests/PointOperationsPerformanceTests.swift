import Foundation
import KVStore
import Testing
import TestSupport
import Workloads

/// Point reads and writes, timed and printed (never asserted: speed is compared in the benchmarks).
/// Each test asserts that what it timed returned the right data.
///
/// `make test` runs these in a debug build at small counts; for figures worth quoting run
/// `swift test -c release --filter KVStorePerformanceTests` (the figures: README's performance table, benchmarks/baseline.md).
@Suite(.serialized) struct PointOperationsPerformanceTests {
    let dir = TemporaryDirectory()

    /// A small Codable value, about 100 bytes in CBOR.
    struct Profile: Codable, Equatable {
        var id: Int
        var name: String
        var score: Double
        var tags: [String]
        var updatedAt: Date

        init(_ i: Int) {
            id = i
            name = "user-\(i)"
            score = Double(i) / 7
            tags = ["a\(i % 5)", "b\(i % 11)"]
            updatedAt = Date(timeIntervalSinceReferenceDate: Double(i))
        }
    }

    static let entries = 10_000

    /// Nanoseconds per call of `body`, over `count` calls.
    static func nanosecondsPerCall(_ count: Int, _ body: (Int) throws -> Void) rethrows -> Double {
        let clock = ContinuousClock()
        let start = clock.now
        for i in 0..<count { try body(i) }
        let elapsed = clock.now - start
        let (seconds, attoseconds) = elapsed.components
        return (Double(seconds) * 1e9 + Double(attoseconds) / 1e9) / Double(count)
    }

    static func report(_ rows: [(String, Double)]) {
        print("KVStore point operations (\(buildMode) build, \(ProcessInfo.processInfo.activeProcessorCount) cores):")
        for (name, ns) in rows {
            let figure = ns >= 10_000 ? String(format: "%10.1f µs", ns / 1000) : String(format: "%10.0f ns", ns)
            print("  \(name.padding(toLength: 52, withPad: " ", startingAt: 0))\(figure)")
        }
    }

    static var buildMode: String {
        #if DEBUG
        "debug"
        #else
        "release"
        #endif
    }

    @Test func pointGetAndPut() throws {
        let store = try dir.store()
        let profiles = try store.collection("profiles", key: Int.self, value: Profile.self)
        try store.write { tx in
            for i in 0..<Self.entries { try profiles.put(Profile(i), forKey: i, in: tx) }
        }
        var rng = SplitMix64(seed: 1)
        let keys = (0..<20_000).map { _ in Int(rng.next() % UInt64(Self.entries)) }
        var rows: [(String, Double)] = []

        var found = 0
        rows.append(("get, own read transaction (decode CBOR)", try Self.nanosecondsPerCall(keys.count) { i in
            if try profiles.get(keys[i]) == Profile(keys[i]) { found += 1 }
        }))
        #expect(found == keys.count)

        found = 0
        try store.read { tx in
            rows.append(("get, shared read transaction (decode CBOR)", try Self.nanosecondsPerCall(keys.count) { i in
                if try profiles.get(keys[i], in: tx)?.id == keys[i] { found += 1 }
            }))
        }
        #expect(found == keys.count)

        var bytes = 0
        try store.read { tx in
            rows.append(("get bytes, shared read transaction (no copy)", try Self.nanosecondsPerCall(keys.count) { i in
                bytes += try profiles.withValueBytes(forKey: keys[i], in: tx) { $0.count } ?? 0
            }))
        }
        #expect(bytes > keys.count * 50)

        rows.append(("contains, missing key", try Self.nanosecondsPerCall(keys.count) { i in
            if try profiles.contains(Self.entries + keys[i]) { found = -1 }
        }))
        #expect(found == keys.count)

        let overwrite = min(keys.count, 5_000)
        try store.write { tx in
            rows.append(("put, shared write transaction (encode CBOR)", try Self.nanosecondsPerCall(overwrite) { i in
                var p = Profile(keys[i]); p.score = -1
                try profiles.put(p, forKey: keys[i], in: tx)
            }))
        }
        #expect(try profiles.get(keys[0])?.score == -1)
        #expect(try profiles.count() == Self.entries)

        for durability in Durability.allCases {
            var options = Store.Options()
            options.durability = durability
            let other = try dir.store("durability-\(durability)", options: options)
            let values = try other.collection("profiles", key: Int.self, value: Profile.self)
            let commits = durability == .durable ? 100 : 1_000
            rows.append(("put + commit, \(durability)", try Self.nanosecondsPerCall(commits) { i in
                try values.put(Profile(i), forKey: i)
            }))
            if durability == .noSync { try other.sync() }
            #expect(try values.count() == commits)
            #expect(try values.get(commits - 1) == Profile(commits - 1))
        }
        Self.report(rows)
    }

    @Test func sharedDefaultsGetAndSet() throws {
        let container = try dir.container("group.com.example.perf")
        let defaults = try container.defaults()
        let count = 2_000
        var rows: [(String, Double)] = []
        try container.store.write { tx in
            rows.append(("defaults set(String), shared write transaction", try Self.nanosecondsPerCall(count) { i in
                try defaults.set("value-\(i)", forKey: "key-\(i)", in: tx)
            }))
        }
        var matches = 0
        rows.append(("defaults string(forKey:)", try Self.nanosecondsPerCall(count) { i in
            if try defaults.string(forKey: "key-\(i)") == "value-\(i)" { matches += 1 }
        }))
        #expect(matches == count)
        rows.append(("defaults set(Int) + commit (durable)", try Self.nanosecondsPerCall(50) { i in
            try defaults.set(i, forKey: "counter")
        }))
        #expect(try defaults.integer(forKey: "counter") == 49)
        Self.report(rows)
    }
}
