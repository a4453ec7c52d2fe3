import Foundation
import Testing
@testable import Codecs
import KVStore

/// The direct paths for `[String: V]` and `LogicalDay` (no generic `Dictionary.init(from:)`): the same
/// bytes, values and errors as the general keyed container gives.
@Suite struct CBORDictionaryTests {
    private func hex(_ s: String) -> [UInt8] {
        stride(from: 0, to: s.count, by: 2).map { UInt8(s.dropFirst($0).prefix(2), radix: 16)! }
    }

    private func kind<T: Decodable>(_: T.Type, _ input: [UInt8]) -> CBORError.Kind? {
        do {
            _ = try CBORDecoder().decode(T.self, from: input)
            return nil
        } catch {
            return (error as? CBORError)?.kind
        }
    }

    /// The shortcut the decoder takes before its cast to `CBORDecodableStringMap`: every dictionary
    /// type is recognised (or its direct path would be lost), nothing else is.
    @Test func dictionaryTypesAreRecognisedFromTheirMetadata() throws {
        struct Point: Codable { var x: Int }
        enum Shade: String, Codable { case light }
        final class Box: Codable {}
        #expect(CBORKnownTypes.isDictionary([String: Int].self))
        #expect(CBORKnownTypes.isDictionary([String: [String: Point]].self))
        #expect(CBORKnownTypes.isDictionary([Int: String].self))
        #expect(CBORKnownTypes.isDictionary([LogicalDay: Shade].self))
        for other: Any.Type in [Int.self, String.self, [Int].self, [String: Int]?.self, Set<String>.self, Point.self, Shade.self,
                                Box.self, (Int, String).self, ((Int) -> Int).self, (any Codable).self, Int.Type.self] {
            #expect(!CBORKnownTypes.isDictionary(other), "\(other)")
        }
        // A struct value inside a dictionary: the dictionary by the direct path, the struct by its own.
        #expect(try CBORDecoder().decode([String: Point].self, from: CBOREncoder().encode(["p": Point(x: 3)]))["p"]?.x == 3)
    }

    @Test func dictionariesRoundTripWithEveryValueKind() throws {
        let ints = ["b": 2, "a": -1, "long.key.number.1": 1 << 40]
        let strings = ["名前": "値", "x": ""]
        let doubles = ["pi": 3.25, "nan": 1e300]
        let bools = ["t": true, "f": false]
        let nested: [String: [Int]] = ["one": [1], "none": []]     // the generic path
        let deeper: [String: [String: Int]] = ["outer": ["inner": 7]]
        #expect(try CBORDecoder().decode([String: Int].self, from: CBOREncoder().encode(ints)) == ints)
        #expect(try CBORDecoder().decode([String: String].self, from: CBOREncoder().encode(strings)) == strings)
        #expect(try CBORDecoder().decode([String: Double].self, from: CBOREncoder().encode(doubles)) == doubles)
        #expect(try CBORDecoder().decode([String: Bool].self, from: CBOREncoder().encode(bools)) == bools)
        #expect(try CBORDecoder().decode([String: [Int]].self, from: CBOREncoder().encode(nested)) == nested)
        #expect(try CBORDecoder().decode([String: [String: Int]].self, from: CBOREncoder().encode(deeper)) == deeper)
    }

    @Test func keysAreWrittenShorterFirstThenBytewiseEvenPastSixteenBytes() throws {
        // 17-byte keys that differ only in their last byte, a shorter one, and a one-byte one.
        let value = ["abcdefghijklmnopz": 1, "abcdefghijklmnopa": 2, "zz": 3, "b": 4]
        let bytes = try CBOREncoder().encode(value)
        let decoded = try CBORValue.decode(bytes)
        guard case .map(let entries) = decoded else { Issue.record("not a map"); return }
        #expect(entries.map(\.key) == [.text("b"), .text("zz"), .text("abcdefghijklmnopa"), .text("abcdefghijklmnopz")])
        // Equal dictionaries built in another order give the same bytes.
        var again: [String: Int] = [:]
        for key in value.keys.sorted().reversed() { again[key] = value[key] }
        #expect(try CBOREncoder().encode(again) == bytes)
    }

    @Test func mapsThatAreNotPlainTextKeysStillDecode() throws {
        // {1: 5}: an integer key becomes "1"; an indefinite-length map; a chunked text key.
        #expect(try CBORDecoder().decode([String: Int].self, from: hex("a10105")) == ["1": 5])
        #expect(try CBORDecoder().decode([String: Int].self, from: hex("bf616105ff")) == ["a": 5])
        #expect(try CBORDecoder().decode([String: Int].self, from: hex("a17f6161ff05")) == ["a": 5])
    }

    @Test func badDictionariesGiveTheErrorsTheGeneralPathGives() throws {
        #expect(kind([String: Int].self, hex("a2616101616102")) == .duplicateKey)         // {"a": 1, "a": 2}
        #expect(kind([String: Int].self, hex("a161ff01")) == .invalidUTF8)                // a key that is not UTF-8
        #expect(kind([String: String].self, hex("a1616162c328")) == .invalidUTF8)         // a value that is not UTF-8
        #expect(kind([String: Int].self, hex("a161616161")) == .typeMismatch)               // {"a": "a"}
        #expect(kind([String: Int].self, hex("820102")) == .typeMismatch)                 // an array
        #expect(kind([String: Int].self, hex("a2616101")) == .truncated)
        let error = try #require(throws: CBORError.self) { try CBORDecoder().decode([String: Int].self, from: hex("a161616161")) }
        #expect(error.codingPath == "a")
    }

    @Test func daysAreReadFromTextOrANumberAndWrittenAsText() throws {
        for number: Int32 in [0, -1, 20_000, -719_528, 2_932_896, Int32.max, Int32.min] {
            let day = LogicalDay(dayNumber: number)
            let bytes = try CBOREncoder().encode(day)
            #expect(try CBORValue.decode(bytes) == .text(day.description))
            #expect(try CBORDecoder().decode(LogicalDay.self, from: bytes) == day)
            #expect(LogicalDay(day.description) == day)
            #expect(try JSONDecoder().decode(LogicalDay.self, from: JSONEncoder().encode(day)) == day)
        }
        #expect(LogicalDay(dayNumber: 0).description == "1970-01-01")
        #expect(LogicalDay(dayNumber: -719_529).description == "-0001-12-31")
        #expect(try CBORDecoder().decode(LogicalDay.self, from: hex("1903e8")) == LogicalDay(dayNumber: 1000))
        #expect(try JSONDecoder().decode(LogicalDay.self, from: Data("1000".utf8)) == LogicalDay(dayNumber: 1000))
        for bad in ["2026-13-01", "2026-1-011", "02026-01-01", "2026-02-30", "", "-", "2026-01-0x"] {
            #expect(LogicalDay(bad) == nil, "\(bad)")
            #expect(kind(LogicalDay.self, try CBOREncoder().encode(bad)) == .invalidValue, "\(bad)")
        }
        #expect(kind(LogicalDay.self, hex("f5")) == .typeMismatch)
    }

    @Test func theCodecRefusesWhatItCouldNotReadBackBeforeWritingIt() throws {
        var limits = CBORLimits.default
        limits.maxDepth = 2
        #expect(try CBORCodec<[[Int]]>(limits: limits).encode([[1]]).count == 3)
        #expect(throws: CBORError.self) { try CBORCodec<[[[Int]]]>(limits: limits).encode([[[1]]]) }
        limits = CBORLimits(maxInputSize: 8)
        #expect(throws: CBORError.self) { try CBORCodec<String>(limits: limits).encode("more than eight bytes") }
    }
}
