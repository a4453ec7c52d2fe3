#if PostgreSQL
import Testing

/// A suite trait for the suites that start several servers at once (issue 51: a primary and its
/// standby, two clusters, gateways behind HAProxy): such suites run one at a time, each holding the
/// permit for its whole run, instead of all starting their clusters together at the start of
/// `make test`, when every other suite starts its own. On two shared cores, a dozen clusters made at
/// once left other suites' connections unanswered for 10 s. The permit is reentrant within a suite
/// (held by its task tree), so a scope provided for the suite and again for its tests cannot wait on
/// itself.
public struct OneServerFleetAtATime: SuiteTrait, TestTrait, TestScoping {
    public init() {}

    public func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        if Self.holding { return try await function() }
        await Self.gate.acquire()
        defer { Task { await Self.gate.release() } }
        try await Self.$holding.withValue(true) { try await function() }
    }

    @TaskLocal static var holding = false
    static let gate = Gate()

    /// One permit, handed to its waiters in turn.
    actor Gate {
        private var busy = false
        private var waiting: [CheckedContinuation<Void, Never>] = []

        func acquire() async {
            guard busy else {
                busy = true
                return
            }
            await withCheckedContinuation { waiting.append($0) }
        }

        func release() {
            if waiting.isEmpty { busy = false } else { waiting.removeFirst().resume() }
        }
    }
}

extension Trait where Self == OneServerFleetAtATime {
    /// Runs the suite while no other suite of several servers runs (``OneServerFleetAtATime``).
    public static var oneServerFleetAtATime: Self { Self() }
}
#endif
