import Foundation
import Testing
import TestSupport
import KVStore
import SyncKit
import Workloads

/// SHA-256 against the FIPS 180-4 examples and NIST CAVS vectors, split inputs, and `sha256sum`.
@Suite struct SHA256Tests {
    static func hex(_ text: String) -> String { SHA256.hex(SHA256.hash(Array(text.utf8))) }

    @Test(.blockingWork) func fips180ExamplesAndNISTVectors() {
        // FIPS 180-4 / NIST "SHA256.pdf" examples.
        #expect(Self.hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Self.hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        // The empty message and the 896-bit message of the NIST test vectors.
        #expect(Self.hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(Self.hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu")
                == "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1")
        // CAVS SHA256ShortMsg, Len = 8, Msg = d3.
        #expect(SHA256.hex(SHA256.hash([0xD3])) == "28969cdfa74a12c82f3bad960b0b000aca2ac329deea5c2328ebc6f2ba9802c1")
        // One million 'a's, fed in uneven pieces.
        var hasher = SHA256()
        let chunk = [UInt8](repeating: 0x61, count: 999)
        var fed = 0
        while fed < 1_000_000 {
            let n = min(chunk.count - fed % 7, 1_000_000 - fed)
            hasher.update(Array(chunk[0..<n]))
            fed += n
        }
        #expect(SHA256.hex(hasher.finalize()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test(.blockingWork) func paddingBoundariesAndSplitsAgree() {
        // Lengths around the 55/56/64-byte padding boundaries, hashed whole and byte by byte.
        var rng = SplitMix64(seed: 7)
        for length in [0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 1000] {
            let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            let whole = SHA256.hash(bytes)
            var split = SHA256()
            for byte in bytes { split.update([byte]) }
            #expect(split.finalize() == whole, "length \(length)")
            #expect(whole.count == 32)
        }
    }

    @Test(.blockingWork) func fileDigestsMatchSha256sum() throws {
        let dir = TemporaryDirectory()
        var rng = SplitMix64(seed: 99)
        let bytes = (0..<(3 << 20) + 17).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        let path = dir.path + "/data.bin"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        let (digest, size) = try SHA256.hash(fileAt: path)
        #expect(size == bytes.count)
        let r = try run("/usr/bin/sha256sum", [path])
        #expect(r.stdout == SHA256.hex(digest) + "  " + path + "\n")
        #expect(throws: KVStoreError.fileNotFound(path: dir.path + "/missing")) { try SHA256.hash(fileAt: dir.path + "/missing") }
        #expect(throws: KVStoreError.invalidPath(dir.path, reason: "is not a regular file")) { try SHA256.hash(fileAt: dir.path) }
    }
}
