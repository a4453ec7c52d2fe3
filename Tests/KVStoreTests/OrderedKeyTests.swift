import Foundation
import Testing
import TestSupport
@testable import KVStore
import Workloads

/// Property tests: for random values, byte order of the encoded keys equals Swift order, and every
/// key decodes back to an equal value.
@Suite final class OrderedKeyTests {
    func checkOrder<K: OrderedKey>(_ values: [K], by precedes: (K, K) -> Bool = { $0 < $1 }) throws {
        let encoded = values.map(\.encodedKey)
        for (value, bytes) in zip(values, encoded) {
            #expect(try K.decodeKey(bytes) == value)
        }
        for i in 0..<values.count {
            let j = (i * 7919 + 13) % values.count
            let swiftOrder = precedes(values[i], values[j])
            let byteOrder = encoded[i].lexicographicallyPrecedes(encoded[j])
            #expect(swiftOrder == byteOrder, "\(values[i]) vs \(values[j])")
            #expect((values[i] == values[j]) == (encoded[i] == encoded[j]))
        }
        // Sorting by bytes gives Swift's order.
        let sortedByBytes = zip(values, encoded).sorted { $0.1.lexicographicallyPrecedes($1.1) }.map(\.0)
        #expect(sortedByBytes == values.sorted(by: precedes))
    }

    /// Swift's `<` on strings, except where the standard library contradicts itself. Swift 6.3 says
    /// neither `"\u{E9}\0" < "e\u{301}"` nor the reverse although the two are not `==` (a NUL after
    /// text that is not in NFC); there the order of the NFC scalars, which Swift documents, decides.
    static func swiftStringOrder(_ a: String, _ b: String) -> Bool {
        if a < b { return true }
        if b < a || a == b { return false }
        let nfc = { (s: String) in s.precomposedStringWithCanonicalMapping.unicodeScalars.map(\.value) }
        return nfc(a).lexicographicallyPrecedes(nfc(b))
    }

    var rng = SplitMix64(seed: 7)

    func randomInt64() -> Int64 {
        switch rng.next() % 4 {
        case 0: Int64(bitPattern: rng.next())
        case 1: Int64(bitPattern: rng.next()) >> Int64(rng.next() % 63)
        case 2: [Int64.min, -1, 0, 1, Int64.max][Int(rng.next() % 5)]
        default: Int64(rng.next() % 200) - 100
        }
    }

    /// Random short strings over an alphabet with NUL, control characters, non-ASCII and, unless
    /// `nfcOnly`, a decomposed "é" (canonically equal to the precomposed one).
    func randomString(nfcOnly: Bool = false) -> String {
        var alphabet: [String] = ["a", "b", "z", "A", "\u{0}", "\u{1}", "é", "日", "本", "😀", "\u{FF}", "ß", " ", "~"]
        if !nfcOnly { alphabet.append("e\u{301}") }
        let length = Int(rng.next() % 6)
        return (0..<length).map { _ in alphabet[Int(rng.next() % UInt64(alphabet.count))] }.joined()
    }

    @Test func integers() throws {
        try checkOrder((0..<2000).map { _ in Int(randomInt64()) })
        try checkOrder((0..<2000).map { _ in Int64(randomInt64()) })
        try checkOrder((0..<2000).map { _ in Int32(truncatingIfNeeded: randomInt64()) } + [.min, .max, 0, -1])
        try checkOrder((0..<2000).map { _ in UInt(rng.next() >> (rng.next() % 64)) } + [0, .max])
        try checkOrder((0..<2000).map { _ in UInt32(truncatingIfNeeded: rng.next()) })
    }

    @Test func strings() throws {
        try checkOrder((0..<2000).map { _ in randomString() }, by: Self.swiftStringOrder)
        // Precomposed and decomposed forms are equal in Swift, and share one key.
        #expect("é".encodedKey == "e\u{301}".encodedKey)
    }

    @Test func uuidsDatesAndDays() throws {
        try checkOrder((0..<1000).map { _ in UUID() })
        try checkOrder((0..<2000).map { _ in
            Date(timeIntervalSinceReferenceDate: Double(randomInt64() % 10_000_000_000) / Double(1 + rng.next() % 1000))
        } + [Date(), .distantPast, .distantFuture, Date(timeIntervalSinceReferenceDate: -0.0)])
        try checkOrder((0..<2000).map { _ in LogicalDay(dayNumber: Int32(truncatingIfNeeded: randomInt64() % 1_000_000)) })
        let day = LogicalDay(year: 2026, month: 11, day: 21)!
        #expect(day.description == "2026-11-21")
        #expect(LogicalDay("2026-11-21") == day)
        #expect(LogicalDay(year: 2026, month: 2, day: 30) == nil)
        #expect(LogicalDay(year: 1970, month: 1, day: 1)?.dayNumber == 0)
        #expect(LogicalDay(year: 1969, month: 12, day: 31)?.dayNumber == -1)
    }

    @Test func tuples() throws {
        try checkOrder((0..<2000).map { _ in Pair(randomString(nfcOnly: true), Int(randomInt64() % 5)) })
        try checkOrder((0..<2000).map { _ in Pair(Int32(randomInt64() % 3), randomString(nfcOnly: true)) })
        try checkOrder((0..<2000).map { _ in Triple(randomString(nfcOnly: true), randomString(nfcOnly: true), UInt32(rng.next() % 3)) })
        try checkOrder((0..<500).map { _ in Pair(UUID(uuidString: "00000000-0000-0000-0000-00000000000\(rng.next() % 3)")!,
                                                  Date(timeIntervalSince1970: Double(randomInt64() % 1000))) })
    }

    /// One list prints and parses every encoding without parts (issue 37): each prints its listed name
    /// and parses back, nested in a tuple too, and no name shadows a later one (the parser tries them
    /// in order).
    @Test func theScalarListPrintsAndParsesEveryScalar() {
        let names = KeyEncoding.scalars.map(\.name)
        #expect(Set(names).count == names.count)
        #expect(Set(KeyEncoding.scalars.map(\.encoding)).count == names.count)
        for (index, scalar) in KeyEncoding.scalars.enumerated() {
            #expect(scalar.encoding.description == scalar.name)
            #expect(KeyEncoding(scalar.name) == scalar.encoding)
            #expect(KeyEncoding("tuple(\(scalar.name),\(scalar.name))") == .tuple([scalar.encoding, scalar.encoding]))
            for later in names.dropFirst(index + 1) { #expect(!later.hasPrefix(scalar.name), "\(scalar.name) shadows \(later)") }
        }
    }

    @Test func keyEncodingDescriptionsRoundTrip() throws {
        for encoding: KeyEncoding in [.int64, .string, .day, .tuple([.uuid, .date]), .tuple([.string, .int32, .bytes])] {
            #expect(KeyEncoding(encoding.description) == encoding)
        }
        #expect(Pair<UUID, Date>.keyEncoding.description == "tuple(uuid,date)")
        #expect(KeyEncoding("tuple(int64)") == nil)
        #expect(KeyEncoding("float") == nil)
        // Text typed by people parses to the same bytes as the Swift key, and renders back.
        let id = UUID()
        let key = Pair(id, LogicalDay(year: 2026, month: 1, day: 31)!)
        let parsed = try KeyEncoding.tuple([.uuid, .day]).parse("[\"\(id.uuidString)\", \"2026-01-31\"]")
        #expect(parsed == key.encodedKey)
        #expect(try KeyEncoding.tuple([.uuid, .day]).render(parsed) == .array([.text(id.uuidString), .text("2026-01-31")]))
        #expect(throws: KeyDecodingError.self) { try KeyEncoding.int64.parse("12x") }
        #expect(throws: KeyDecodingError.self) { try KeyEncoding.day.parse("2026-13-01") }
        // Tuple components typed as JSON: numbers as written, strings; anything else is named.
        let numbered = KeyEncoding.tuple([.int64, .uint64, .day])
        let typed = "[-5, 18446744073709551615, \"2026-01-31\"]"
        #expect(try numbered.render(numbered.parse(typed)).description == typed)
        for (text, reason) in [("[true, 1, \"2026-01-31\"]", "component 1 of the key must be a string or a number"),
                               ("[1, null, \"2026-01-31\"]", "component 2 of the key must be a string or a number"),
                               ("[1, 2, {}]", "component 3 of the key must be a string or a number"),
                               ("[1, 2]", "has 3 components, got 2"),
                               ("{\"a\": 1}", "key is a JSON array of 3 values"),
                               ("[1.5, 2, \"2026-01-31\"]", "1.5")] {
            #expect {
                try numbered.parse(text)
            } throws: { error in
                (error as? KeyDecodingError)?.reason.contains(reason) == true
            }
        }
    }

    @Test func malformedKeyBytesThrow() {
        #expect(throws: KeyDecodingError.self) { try Int.decodeKey([1, 2, 3]) }
        #expect(throws: KeyDecodingError.self) { try Pair<String, Int>.decodeKey([0x61, 0x00, 0x07]) }
        #expect(throws: KeyDecodingError.self) { try String.decodeKey([0xFF, 0xFE]) }
        #expect(throws: KeyDecodingError.self) { try Int32.decodeKey([0, 0, 0, 0, 0]) }
    }
}
