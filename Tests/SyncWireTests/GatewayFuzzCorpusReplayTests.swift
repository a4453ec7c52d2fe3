import Foundation
import FuzzProperties
import GatewayFuzzProperties
import Testing

/// Replays every input kept in fuzz/corpus/gateway/ through the property its libFuzzer harness checks
/// (fuzz/GatewayProperties/, the same code), so that `make test` keeps every input the fuzzer found
/// interesting passing; and checks that the adversarial suite's cases kept there as seeds are refused.
@Suite("sync gateway fuzz corpus replay")
struct GatewayFuzzCorpusReplayTests {
    @Test func everyKeptInputSatisfiesTheProperty() throws {
        let report = try FuzzCorpus.replay(FuzzCorpus.folder("gateway", testFile: #filePath)) { input throws(PropertyViolation) in
            try GatewayProperty.check(input)
        }
        for failure in report.failures { Issue.record("fuzz/corpus/gateway/\(failure)") }
        #expect(report.accepted > 0 && report.rejected.count >= 5, "\(report)")
        print("fuzz/corpus/gateway: \(report)")
    }

    /// The attacks of GatewayAdversarialTests, as the parsers see them: each is refused.
    @Test func theAdversarialSuitesCasesAreRefused() throws {
        let folder = FuzzCorpus.folder("gateway", testFile: #filePath)
        for name in ["seed-push-key-2-63", "seed-push-key-2-64-1", "seed-push-over-64-bits", "seed-push-count-2-63",
                     "seed-push-count-over-body", "seed-push-trailing", "seed-push-not-utf8", "seed-push-nul-kind",
                     "seed-push-nul-device", "seed-push-clock-2-63", "seed-push-token-2-64-1",
                     "seed-target-3", "seed-target-4", "seed-target-5", "seed-target-6", "seed-target-7", "seed-target-8",
                     "seed-head-1", "seed-head-2", "seed-head-3", "seed-head-4", "seed-head-5", "seed-head-6", "seed-head-7",
                     "seed-head-8", "seed-head-10", "seed-head-13", "seed-head-14", "seed-jwt-install-device", "seed-jwt-none", "seed-jwt-crit", "seed-jwt-two-alg", "seed-jwt-two-groups",
                     "seed-jwt-no-exp", "seed-jwt-long-lived", "seed-jwt-iat-old", "seed-jwt-aud-other", "seed-jwt-reserved-device",
                     "seed-claims-2", "seed-claims-3", "seed-claims-4", "seed-claims-5", "seed-answer-page-count-lies"] {
            let input = [UInt8](try Data(contentsOf: folder.appendingPathComponent(name)))
            #expect(try GatewayProperty.check(input) != .accepted, "fuzz/corpus/gateway/\(name) was accepted")
        }
        for name in ["seed-push-valid", "seed-push-lifted-bound", "seed-push-impersonation", "seed-target-0", "seed-head-0", "seed-head-12",
                     "seed-jwt-valid", "seed-jwt-aud-array", "seed-claims-0", "seed-answer-page"] {
            let input = [UInt8](try Data(contentsOf: folder.appendingPathComponent(name)))
            #expect(try GatewayProperty.check(input) == .accepted, "fuzz/corpus/gateway/\(name) was refused")
        }
    }
}
