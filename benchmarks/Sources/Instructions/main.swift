// Runs one workload of BenchmarkWorkloads for counting its instructions under callgrind:
//
//     Instructions <workload> <implementation> <iterations>
//     Instructions --list      (every "<workload> · <implementation>" and its iterations, tab-separated)
//     Instructions --interleave <workload> <rounds> <implementation>...
//
// --interleave times the implementations of one workload side by side: each round runs one operation
// of each, in an order shuffled anew each round, so that whatever else the machine does falls on all of
// them alike, and none always follows the same neighbour; it prints each
// one's p50 and p90 and its ratio to the last one named (the floor), by medians.
//
// Setup and a few warm-up operations run first; then `measuredLoop` runs the operation <iterations>
// times. scripts/instructions.py counts only inside it (callgrind --toggle-collect='*measuredLoop*').
import BenchmarkWorkloads
import Foundation

/// Runs `operation` `iterations` times: the one function whose instructions callgrind counts.
@inline(never)
func measuredLoop(_ operation: BenchmarkWorkload.Operation, _ iterations: Int) throws {
    for _ in 0..<iterations { try operation() }
}

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("Instructions: \(message)\n".utf8))
    exit(2)
}

let arguments = CommandLine.arguments.dropFirst()
if arguments.first == "--list" {
    for workload in BenchmarkWorkload.all { print("\(workload.name)\t\(workload.instructionIterations)") }
    exit(0)
}
if arguments.first == "--interleave" {
    let rest = Array(arguments.dropFirst())
    guard rest.count >= 3, let rounds = Int(rest[1]), rounds > 0 else {
        fail("usage: Instructions --interleave <workload> <rounds> <implementation>...")
    }
    let implementations = Array(rest[2...])
    var operations: [BenchmarkWorkload.Operation] = []
    for implementation in implementations {
        guard let workload = BenchmarkWorkload.named("\(rest[0]) · \(implementation)") else {
            fail("no workload named \"\(rest[0]) · \(implementation)\" (see --list)")
        }
        do {
            let operation = try workload.setup()
            for _ in 0..<3 { try operation() }
            operations.append(operation)
        } catch {
            fail("\(workload.name) failed: \(error)")
        }
    }
    var times = Array(repeating: [Double](), count: operations.count)
    let clock = ContinuousClock()
    // Each round runs them in a new order (a fixed sequence of shuffles, the same every run): one
    // implementation's commit changes what the next one finds (a file grown, a journal commit of the
    // disk under way), so a fixed order would give each a neighbour of its own.
    var random = SplitMix64(seed: 39)
    do {
        for _ in 0..<rounds {
            for index in operations.indices.shuffled(using: &random) {
                let operation = operations[index]
                let elapsed = try clock.measure { try operation() }
                times[index].append(Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6)
            }
        }
    } catch {
        fail("\(rest[0]) failed: \(error)")
    }
    func percentile(_ values: [Double], _ p: Double) -> Double {
        let sorted = values.sorted()
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
    }
    let floor = percentile(times[times.count - 1], 0.5)
    print("\(rest[0]), \(rounds) rounds interleaved:")
    for (index, implementation) in implementations.enumerated() {
        let p50 = percentile(times[index], 0.5), p90 = percentile(times[index], 0.9)
        print("  \(implementation): p50 \(Int(p50.rounded())) µs, p90 \(Int(p90.rounded())) µs, \(String(format: "%.2f", p50 / floor))× \(implementations.last!)")
    }
    exit(0)
}
guard arguments.count == 3, let iterations = Int(arguments.last!), iterations > 0 else {
    fail("usage: Instructions <workload> <implementation> <iterations> | --list")
}
let name = "\(arguments[arguments.startIndex]) · \(arguments[arguments.startIndex + 1])"
guard let workload = BenchmarkWorkload.named(name) else { fail("no workload named \"\(name)\" (see --list)") }
do {
    let operation = try workload.setup()
    for _ in 0..<3 { try operation() }
    try measuredLoop(operation, iterations)
} catch {
    fail("\(name) failed: \(error)")
}

/// A small seeded generator (SplitMix64), so that the interleaved orders are the same from run to run.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
