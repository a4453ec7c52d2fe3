import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport

/// What observations and async sync requests cost in threads: none each. kvtest-helper opens N of
/// them in a process of its own (where no other test's threads run) and prints its thread count
/// (`/proc/self/task`) before and while they run: the bound is N / 2, far below the N threads a thread
/// each would add (seen failing that way with a thread each put back: +72 and +105).
@Suite struct ObservationThreadTests {
    let dir = TemporaryDirectory()

    /// The figures after "threads" in the helper's line.
    func figures(_ arguments: [String]) throws -> [Int] {
        let r = try run(productsDirectory() + "/kvtest-helper", arguments, timeout: BuildScale.seconds(180))
        #expect(r.status == 0, "\(r.stderr)")
        let line = try #require(r.stdout.split(separator: "\n").first { $0.hasPrefix("threads ") }, "\(r.stdout)\(r.stderr)")
        return line.split(separator: " ").dropFirst().compactMap { Int($0) }
    }

    @Test(.blockingWork) func manyObservationsAddNoThreadEach() throws {
        let count = 64
        let numbers = try figures(["observe-many", dir.path, "group.com.example.threads", "\(count)"])
        let (before, during) = (try #require(numbers.first), try #require(numbers.dropFirst().first))
        print("[threads] \(count) observations, in a process of their own: \(before) threads before, \(during) while they run")
        #expect(during - before < count / 2, "\(count) observations added \(during - before) threads")
    }

    @Test(.blockingWork) func manyAsyncSyncRequestsAddNoThreadEach() throws {
        let count = 32
        let numbers = try figures(["request-many", dir.path, "group.com.example.requestthreads", "\(count)"])
        try #require(numbers.count == 3, "\(numbers)")
        let (before, during, late) = (numbers[0], numbers[1], numbers[2])
        print("[threads] \(count) async sync requests, in a process of their own: \(before) threads before, at most \(during) while they wait")
        #expect(late == count, "\(late) of \(count) requests ended not within their deadline")
        #expect(during - before < count / 2, "\(count) requests added \(during - before) threads")
    }
}
