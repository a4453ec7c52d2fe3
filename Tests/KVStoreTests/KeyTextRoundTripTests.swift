import Foundation
import Testing
import TestSupport
@testable import KVStore

/// Every key kvtool prints (``KeyEncoding/render(_:)``'s text) must parse back to the same bytes, so
/// that `get`, `delete`, `--prefix` and ranges find the entry `scan` showed (issue 36: a date with
/// microseconds was printed to the millisecond, and the printed key named no entry).
@Suite struct KeyTextRoundTripTests {
    /// Deterministic: a failure names its seed and case.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    static func randomDate(_ g: inout Generator) -> Date {
        switch Int.random(in: 0..<6, using: &g) {
        case 0: return Date(timeIntervalSince1970: Double(Int64.random(in: 0...2_000_000_000, using: &g)) + Double(Int.random(in: 0..<1_000_000, using: &g)) / 1e6)
        case 1: return Date(timeIntervalSinceReferenceDate: Double.random(in: -3e10...2.5e11, using: &g))
        case 2: return Date(timeIntervalSinceReferenceDate: Double(bitPattern: g.next()))
        case 3: return Date(timeIntervalSinceReferenceDate: Double.random(in: -2...2, using: &g))
        case 4: return Date(timeIntervalSince1970: Double(Int64.random(in: -62_135_596_800...253_402_300_799, using: &g)))
        default: return Date()
        }
    }

    static func randomText(_ g: inout Generator) -> String {
        let alphabet = Array("abc XYZ\"\\[],{}:0\u{0}\u{1}é日本🙂\n\t-.")
        return String((0..<Int.random(in: 0...12, using: &g)).map { _ in alphabet.randomElement(using: &g)! })
    }

    static func randomKey(_ encoding: KeyEncoding, _ g: inout Generator, terminal: Bool = true) -> [UInt8] {
        var bytes: [UInt8] = []
        switch encoding {
        case .int64: Int64(bitPattern: g.next()).encodeKey(into: &bytes, terminal: terminal)
        case .int32: Int32(truncatingIfNeeded: g.next()).encodeKey(into: &bytes, terminal: terminal)
        case .uint64: g.next().encodeKey(into: &bytes, terminal: terminal)
        case .uint32: UInt32(truncatingIfNeeded: g.next()).encodeKey(into: &bytes, terminal: terminal)
        case .string:
            var text = randomText(&g)
            if terminal && text.isEmpty { text = "x" }
            text.encodeKey(into: &bytes, terminal: terminal)
        case .uuid: UUID().encodeKey(into: &bytes, terminal: terminal)
        case .day: LogicalDay(dayNumber: Int32.random(in: -719_162...2_932_896, using: &g)).encodeKey(into: &bytes, terminal: terminal)
        case .date: randomDate(&g).encodeKey(into: &bytes, terminal: terminal)
        case .bytes:
            let count = Int.random(in: terminal ? 1...6 : 0...6, using: &g)
            ByteKey((0..<count).map { _ in UInt8.random(in: 0...255, using: &g) }).encodeKey(into: &bytes, terminal: terminal)
        case .tuple(let parts):
            for (i, part) in parts.enumerated() {
                bytes += randomKey(part, &g, terminal: terminal && i == parts.count - 1)
            }
        }
        return bytes
    }

    static let encodings: [KeyEncoding] = KeyEncoding.scalars.map(\.encoding) + [
        .tuple([.date, .uuid]), .tuple([.string, .int32, .bytes]), .tuple([.uuid, .day]), .tuple([.date, .date]),
        .tuple([.bytes, .string]), .tuple([.tuple([.string, .date]), .int64]),
    ]

    @Test(.blockingWork, arguments: encodings)
    func printedKeysParseToTheSameBytes(encoding: KeyEncoding) throws {
        var g = Generator(state: 36)
        for i in 0..<3000 {
            let key = Self.randomKey(encoding, &g)
            let text = try encoding.render(key).description
            let back = try encoding.parse(text)
            #expect(back == key, "case \(i) of \(encoding): \(Hex.encode(key)) printed as \(text) parses to \(Hex.encode(back))")
            if back != key { return }
        }
    }

    /// The reported key: a notification received at 03:58:32.246376Z.
    @Test(.blockingWork) func aDateWithMicrosecondsPrintsThemAndReadsBack() throws {
        let date = try #require(KeyEncoding.parseISO8601("2026-11-27T03:58:32Z")).addingTimeInterval(0.246376)
        var bytes: [UInt8] = []
        date.encodeKey(into: &bytes, terminal: true)
        let text = try KeyEncoding.date.render(bytes).description
        #expect(text.hasPrefix("2026-11-27T03:58:32.246376"), "\(text)")
        #expect(try KeyEncoding.date.parse(text) == bytes)
        // Millisecond text names another key: that is what `get` used to be given.
        #expect(try KeyEncoding.date.parse("2026-11-27T03:58:32.246Z") != bytes)
        // Whole seconds and milliseconds still print as before.
        var whole: [UInt8] = []
        Date(timeIntervalSince1970: 1_795_000_000).encodeKey(into: &whole, terminal: true)
        #expect(try KeyEncoding.date.render(whole).description == "2026-11-18T11:06:40.000Z")
        // Dates no ISO 8601 text names exactly are printed as their key bytes, which parse back.
        var infinite: [UInt8] = []
        Date.distantFuture.addingTimeInterval(.infinity).encodeKey(into: &infinite, terminal: true)
        let hex = try KeyEncoding.date.render(infinite).description
        #expect(hex.hasPrefix("0x"))
        #expect(try KeyEncoding.date.parse(hex) == infinite)
    }
}
