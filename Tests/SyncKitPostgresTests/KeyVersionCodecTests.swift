#if PostgreSQL
import Foundation
import KVStore
@testable import SyncKitPostgres
import Testing

/// The replicator's per-key versions, written directly: byte for byte what `Codable` writes, for
/// every width of every field.
@Suite struct KeyVersionCodecTests {
    @Test func theDirectEncoderWritesTheBytesCodableWrites() throws {
        var state: UInt64 = 0x5EED_0003
        func next() -> UInt64 {
            state ^= state >> 12; state ^= state << 25; state ^= state >> 27
            return state &* 0x2545_F491_4F6C_DD1D
        }
        let edges: [UInt64] = [0, 1, 23, 24, 255, 256, 65_535, 65_536, 0xFFFF_FFFF, 0x1_0000_0000, UInt64(Int64.max), UInt64.max]
        let devices = ["", "a", "3f2504e0-4f89-11d3-9a0c-0305e82c3301", "端末", String(repeating: "d", count: 23),
                       String(repeating: "d", count: 24), String(repeating: "d", count: 256), String(repeating: "d", count: 5_000)]
        let codec = KeyVersion.codec
        var compared = 0
        for round in 0..<20_000 {
            let clock = round % 3 == 0 ? edges[Int(next() % UInt64(edges.count))] : next() >> (next() % 64)
            var version = Int64(bitPattern: round % 3 == 1 ? edges[Int(next() % UInt64(edges.count))] : next() >> (next() % 64))
            if round % 5 == 0 { version = -version }
            if round % 7 == 0 { version = [Int64.min, -1, -24, -25, -256, -257, -65_537][Int(next() % 7)] }
            let value = KeyVersion(version: version, clock: clock, device: devices[Int(next() % UInt64(devices.count))])
            let direct = try codec.encode(value)
            #expect(direct == (try CBOREncoder().encode(value)), "\(value)")
            #expect(try direct.withUnsafeBytes { try codec.decode($0) } == value)
            compared += 1
        }
        #expect(compared == 20_000)
    }
}
#endif
