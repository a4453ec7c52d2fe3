// Runs one workload of BenchmarkWorkloads for counting its instructions under callgrind:
//
//     Instructions <workload> <implementation> <iterations>
//     Instructions --list      (every "<workload> · <implementation>" and its iterations, tab-separated)
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
