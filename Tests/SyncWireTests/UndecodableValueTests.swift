import Foundation
import KVStore
import SyncWire
import Testing

/// What the gateway refuses at a push as a value no device can decode (issue 47), and what it must
/// not: each rule with its boundary.
struct UndecodableValueTests {
    static func nested(_ depth: Int) -> [UInt8] { [UInt8](repeating: 0x81, count: depth) + [0x00] }

    @Test func deepCBORIsRefusedAndEverythingADeviceCanStorePasses() throws {
        // Mallory's value, and one far deeper (checked without recursion: no stack to exhaust).
        for depth in [70, 200_000] {
            let problem = try #require(UndecodableValue.problem(kind: "collection", value: Self.nested(depth)))
            #expect(problem.contains("nested deeper than 64 levels"), "\(problem)")
            #expect(UndecodableValue.problem(kind: "defaults", value: Self.nested(depth)) != nil)
        }
        // What every device's decoder reads passes, in either kind, and so does a delete.
        for depth in [0, 1, 63] {
            #expect(try CBORValue.decode(Self.nested(depth)) != .null)
            #expect(UndecodableValue.problem(kind: "collection", value: Self.nested(depth)) == nil)
            #expect(UndecodableValue.problem(kind: "defaults", value: Self.nested(depth)) == nil)
        }
        #expect(UndecodableValue.problem(kind: "collection", value: nil) == nil)
        // A collection of raw bytes or fixed layouts stores any bytes: those that merely start as a
        // deep array (truncated, or followed by more bytes) pass, and so does what is not CBOR at all.
        let truncated = [UInt8](repeating: 0x81, count: 70)
        let trailing = Self.nested(70) + [0x00]
        for bytes in [truncated, trailing, [0xff, 0x00, 0x1c], [UInt8](repeating: 0xff, count: 4_096)] {
            #expect(UndecodableValue.problem(kind: "collection", value: bytes) == nil, "\(bytes.prefix(8))")
        }
        // A defaults value is CBOR on every device: anything else is refused.
        for bytes in [truncated, trailing, [0xff, 0x00], [0x61, 0xff], [0xa2, 0x61, 0x61, 0x01, 0x61, 0x61, 0x02]] {
            let problem = try #require(UndecodableValue.problem(kind: "defaults", value: bytes), "\(bytes.prefix(8))")
            #expect(problem.hasPrefix("not CBOR that a device reads"), "\(problem)")
        }
    }

    /// What the check costs the gateway's push, printed (never asserted): 10,000 values of about 200
    /// bytes (a record's CBOR map), and one of 8 MiB.
    @Test func whatTheCheckCostsIsPrinted() throws {
        struct Record: Codable { var title: String; var notes: String; var count: Int; var tags: [String] }
        let record = try CBOREncoder().encode(Record(title: String(repeating: "t", count: 60), notes: String(repeating: "n", count: 100),
                                                     count: 42, tags: ["a", "b", "c"]))
        let large = try CBOREncoder().encode(String(repeating: "x", count: 8 << 20))
        let clock = ContinuousClock()
        var refused = 0
        let small = clock.measure {
            for _ in 0..<10_000 where UndecodableValue.problem(kind: "collection", value: record) != nil { refused += 1 }
        }
        let big = clock.measure { if UndecodableValue.problem(kind: "collection", value: large) != nil { refused += 1 } }
        #expect(refused == 0)
        print("[undecodable] 10,000 values of \(record.count) bytes checked in \(small); one of \(large.count) bytes in \(big) (this build)")
    }
}
