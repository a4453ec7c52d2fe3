import Foundation
import FuzzProperties
import GatewayFuzzProperties
import Testing

/// The blob endpoints' attacks (BlobAttacks, issue 49) kept as seeds of the `gateway` fuzz target: as
/// its property sees them, each attack is refused and each honest request admitted
/// (GatewayFuzzCorpusReplayTests replays every input of the folder besides).
@Suite struct BlobFuzzSeedTests {
    @Test func theBlobAttacksAreRefusedAndTheHonestRequestsAdmitted() throws {
        let folder = FuzzCorpus.folder("gateway", testFile: #filePath)
        func check(_ name: String) throws -> FuzzOutcome {
            try GatewayProperty.check([UInt8](try Data(contentsOf: folder.appendingPathComponent("seed-" + name))))
        }
        // An upper-case hash, one digit short, one too many, another method, no hash, a segment after
        // it, a query; an Upload-Length of 2^63, a chunk over 1 MiB, a negative offset, a chunk past
        // the end, two ranges, a range backwards, a PUT without its Content-Length.
        for name in ["blob-target-3", "blob-target-4", "blob-target-5", "blob-target-6", "blob-target-7", "blob-target-8", "blob-target-9",
                     "blob-head-4", "blob-head-5", "blob-head-6", "blob-head-7", "blob-head-8", "blob-head-9", "blob-head-10"] {
            #expect(try check(name) != .accepted, "fuzz/corpus/gateway/seed-\(name) was accepted")
        }
        // HEAD, PUT, GET; a chunk, a range, a suffix, a HEAD with its credential, a range from past any end
        // (admitted: 416 once the size is known).
        for name in ["blob-target-0", "blob-target-1", "blob-target-2", "blob-head-0", "blob-head-1", "blob-head-2", "blob-head-3", "blob-head-11"] {
            #expect(try check(name) == .accepted, "fuzz/corpus/gateway/seed-\(name) was refused")
        }
    }
}
