#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import Testing
import TestSupport
@testable import kvtool

/// Replication's errors are classified in one table (`ReplicationError.classification`), which
/// kvtool's exit codes and a request's failure reason both read (issue 48: there were three tables).
/// Each error keeps the exit code and reason it had before.
@Suite struct ErrorClassificationTests {
    @Test(.blockingWork) func everyReplicationErrorKeepsItsExitCodeAndItsReason() throws {
        let target = Mutation.Target.collection("c")
        // Every case, with the exit code and the recorded reason the three tables gave it.
        let cases: [(ReplicationError, CLIError.Kind, SyncFailure.Reason)] = [
            (.invalidServerURL("u", reason: "r"), .badInput, .other),
            (.server("s"), .failure, .other),
            (.unreachable("u"), .failure, .unreachable),
            (.malformedServerRow(sequence: 1, reason: "r"), .badInput, .other),
            (.serverSchemaTooNew(found: 9, supported: 8), .failure, .other),
            (.notDeclared(target), .notFound, .other),
            (.unsupportedTarget(target, reason: "r"), .badInput, .other),
            (.corruptState("c"), .failure, .other),
            (.clockAhead(by: .seconds(90), limit: .seconds(60)), .clockSkew, .clockSkew),
            (.pushRefused(reason: "changes-per-push", limit: 1, detail: "d"), .failure, .other),
            (.noServer, .failure, .other),
            (.invalidCredential("c"), .badInput, .credential),
            (.credentialRefused("c"), .credential, .credential),
            (.rateLimited(retryAfter: .seconds(1)), .failure, .rateLimited),
            (.deviceInUse("d"), .credential, .credential),
            (.notQuarantined("n"), .notFound, .other),
            (.undecodableValue("u"), .badInput, .other),
            (.ownedElsewhere(nil, container: "c"), .failure, .other),
        ]
        for (error, kind, reason) in cases {
            #expect(CLIError(mapping: error)?.kind == kind, "\(error)")
            #expect(CLIError(mapping: error)?.message == error.description)
            #expect(error.classification.failureReason == reason, "\(error)")
        }
        // Every class is reached by some error above.
        #expect(Set(cases.map { "\($0.0.classification)" }).count == ReplicationError.Classification.allCases.count)
        // A request that failed for a reason exits as the run that failed for it.
        for (error, kind, _) in cases where ![.badInput, .notFound].contains(kind) {
            #expect(CLIError.Kind(error.classification.failureReason) == kind, "\(error)")
        }
    }
}
#endif
