import Foundation
import Testing
import TestSupport
import Workloads
@testable import Codecs

// MARK: - Helpers

private func cborHex(_ bytes: [UInt8]) -> String {
    bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}

private func bytes(_ hex: String) -> [UInt8] {
    let digits = Array(hex.filter { !$0.isWhitespace })
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(digits[$0 ... $0 + 1]), radix: 16) ?? 0 }
}

private func encode<T: Encodable>(_ value: T) throws -> [UInt8] { try CBOREncoder().encode(value) }

private func roundTrip<T: Codable>(_ value: T, limits: CBORLimits = .default) throws -> T {
    try CBORDecoder(limits: limits).decode(T.self, from: try CBOREncoder().encode(value))
}

/// Decoding `input` as `T` fails with a CBORError of `kind`; returns the error.
@discardableResult
private func expectError<T: Decodable>(_: T.Type, _ input: [UInt8], _ kind: CBORError.Kind,
                                       limits: CBORLimits = .default,
                                       sourceLocation: SourceLocation = #_sourceLocation) -> CBORError? {
    do {
        let value = try CBORDecoder(limits: limits).decode(T.self, from: input)
        Issue.record("expected \(kind.rawValue), decoded \(value)", sourceLocation: sourceLocation)
        return nil
    } catch let error as CBORError {
        #expect(error.kind == kind, "\(error)", sourceLocation: sourceLocation)
        #expect(!error.description.contains("\n"), sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected CBORError, got \(type(of: error)): \(error)", sourceLocation: sourceLocation)
        return nil
    }
}

// MARK: - Models

private struct Address: Codable, Equatable, Hashable {
    var street: String
    var zip: String?
    var tags: [String]
}

private enum Status: String, Codable { case active, retired }

private enum Shape: Codable, Equatable {
    case circle(radius: Double)
    case rect(width: Double, height: Double)
    case point
}

private struct Person: Codable, Equatable {
    var name: String
    var age: Int
    var email: String?
    var nickname: String?
    var status: Status
    var addresses: [Address]
    var scores: [String: Int]
    var byID: [Int: String]
    var shapes: [Shape]
    var matrix: [[Double]]
    var optionals: [Int?]
    var nested: [String: [Address]]
    var created: Date
    var balance: Decimal
    var id: UUID
    var homepage: URL?
    var avatar: Data
    var history: [Date]
    var ledger: [String: Decimal]
    var related: [UUID: Int]

    static let sample = Person(
        name: "Ada Lovelace", age: 36, email: "ada@example.com", nickname: nil, status: .retired,
        addresses: [Address(street: "12 St James's Square", zip: "SW1Y 4JH", tags: ["home", "london"]),
                    Address(street: "Ockham Park", zip: nil, tags: [])],
        scores: ["math": 100, "poetry": -3], byID: [1: "one", -7: "minus seven", 1000: "thousand"],
        shapes: [.circle(radius: 1.5), .rect(width: 2, height: 3), .point],
        matrix: [[1, 2.5], [], [-0.0, 1e300]], optionals: [1, nil, 3],
        nested: ["a": [Address(street: "x", zip: "y", tags: ["z"])], "b": []],
        created: Date(timeIntervalSinceReferenceDate: 123_456_789.123_456_7), balance: Decimal(string: "1234.56") ?? 0,
        id: UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F") ?? UUID(),
        homepage: URL(string: "https://example.com/ada?x=1#top"), avatar: Data([0, 1, 2, 255]),
        history: [Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_700_000_000.25)],
        ledger: ["fee": Decimal(string: "-0.000001") ?? 0, "big": Decimal(string: "99999999999999999999999999999999999999") ?? 0],
        related: [UUID(uuidString: "00000000-0000-0000-0000-000000000001") ?? UUID(): 1])
}

private class Animal: Codable {
    var name: String
    var legs: Int
    init(name: String, legs: Int) { self.name = name; self.legs = legs }
}

/// Encodes its superclass through `superEncoder()` (key "super").
private final class Dog: Animal {
    var breed: String
    private enum CodingKeys: String, CodingKey { case breed }

    init(name: String, legs: Int, breed: String) {
        self.breed = breed
        super.init(name: name, legs: legs)
    }

    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        breed = try container.decode(String.self, forKey: .breed)
        try super.init(from: container.superDecoder())
    }

    override func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(breed, forKey: .breed)
        try super.encode(to: container.superEncoder())
    }
}

/// Encodes its superclass through `superEncoder(forKey:)` and fills it after its own fields, and
/// writes an unkeyed container with a super encoder too.
private final class Cat: Animal {
    var lives: [Int]
    private enum CodingKeys: String, CodingKey { case parent, lives }

    init(name: String, legs: Int, lives: [Int]) {
        self.lives = lives
        super.init(name: name, legs: legs)
    }

    required init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        var unkeyed = try container.nestedUnkeyedContainer(forKey: .lives)
        var lives: [Int] = []
        lives.append(try unkeyed.decode(Int.self))
        lives.append(try Int(from: unkeyed.superDecoder()))
        while !unkeyed.isAtEnd { lives.append(try unkeyed.decode(Int.self)) }
        self.lives = lives
        try super.init(from: container.superDecoder(forKey: .parent))
    }

    override func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        let parent = container.superEncoder(forKey: .parent)
        var unkeyed = container.nestedUnkeyedContainer(forKey: .lives)
        try unkeyed.encode(lives[0])
        let second = unkeyed.superEncoder()
        for life in lives.dropFirst(2) { try unkeyed.encode(life) }
        try lives[1].encode(to: second)          // filled after the items that follow it
        try super.encode(to: parent)             // filled after the other keys
    }
}

private struct Widths: Codable, Equatable {
    var i: Int, i8: Int8, i16: Int16, i32: Int32, i64: Int64
    var u: UInt, u8: UInt8, u16: UInt16, u32: UInt32, u64: UInt64

    static let min = Widths(i: .min, i8: .min, i16: .min, i32: .min, i64: .min, u: .min, u8: .min, u16: .min, u32: .min, u64: .min)
    static let max = Widths(i: .max, i8: .max, i16: .max, i32: .max, i64: .max, u: .max, u8: .max, u16: .max, u32: .max, u64: .max)
}

/// Counts the nesting of arrays around an integer.
private struct Depth: Decodable {
    let depth: Int
    init(from decoder: any Decoder) throws {
        if var container = try? decoder.unkeyedContainer() {
            depth = (container.isAtEnd ? 0 : try container.decode(Depth.self).depth) + 1
        } else {
            _ = try decoder.singleValueContainer().decode(Int.self)
            depth = 0
        }
    }
}

// MARK: - Wire format

@Suite("CBOR wire format (RFC 8949 Appendix A)")
struct CBORWireFormatTests {
    @Test("integers use the shortest head", arguments: [
        (Int64(0), "00"), (1, "01"), (10, "0a"), (23, "17"), (24, "1818"), (25, "1819"), (100, "1864"),
        (255, "18ff"), (256, "190100"), (500, "1901f4"), (1000, "1903e8"), (65535, "19ffff"), (65536, "1a00010000"),
        (1_000_000, "1a000f4240"), (1_000_000_000_000, "1b000000e8d4a51000"), (.max, "1b7fffffffffffffff"),
        (-1, "20"), (-10, "29"), (-24, "37"), (-25, "3818"), (-100, "3863"), (-1000, "3903e7"), (.min, "3b7fffffffffffffff"),
    ])
    func integers(value: Int64, expected: String) throws {
        #expect(cborHex(try encode(value)) == expected)
        #expect(try CBORDecoder().decode(Int64.self, from: bytes(expected)) == value)
    }

    @Test func unsignedExtremes() throws {
        #expect(cborHex(try encode(UInt64.max)) == "1bffffffffffffffff")
        #expect(cborHex(try encode(UInt8(255))) == "18ff")
        #expect(cborHex(try encode(Int8(-128))) == "387f")
        #expect(try CBORValue.decode(bytes("3bffffffffffffffff")) == .negative(.max))
        #expect(CBORValue.negative(.max).description == "-18446744073709551616")
    }

    @Test func scalars() throws {
        #expect(cborHex(try encode(1.5)) == "fb3ff8000000000000")
        #expect(cborHex(try encode(Float(1.5))) == "fb3ff8000000000000")
        #expect(cborHex(try encode(-4.1)) == "fbc010666666666666")
        #expect(cborHex(try encode(1.0e300)) == "fb7e37e43c8800759c")
        #expect(cborHex(try encode(Double.infinity)) == "fb7ff0000000000000")
        #expect(cborHex(try encode(true)) == "f5")
        #expect(cborHex(try encode(false)) == "f4")
        #expect(cborHex(try encode(Int?.none)) == "f6")
        #expect(cborHex(try encode("")) == "60")
        #expect(cborHex(try encode("a")) == "6161")
        #expect(cborHex(try encode("IETF")) == "6449455446")
        #expect(cborHex(try encode("\"\\")) == "62225c")
        #expect(cborHex(try encode("\u{00fc}")) == "62c3bc")
        #expect(cborHex(try encode("\u{6c34}")) == "63e6b0b4")
        #expect(cborHex(try encode("\u{10151}")) == "64f0908591")
        #expect(cborHex(try encode(Data())) == "40")
        #expect(cborHex(try encode(Data([1, 2, 3, 4]))) == "4401020304")
    }

    @Test func containers() throws {
        #expect(cborHex(try encode([Int]())) == "80")
        #expect(cborHex(try encode([1, 2, 3])) == "83010203")
        #expect(cborHex(CBORValue.array([.unsigned(1), .array([.unsigned(2), .unsigned(3)])]).encoded()) == "8201820203")
        #expect(cborHex(try encode(Array(1 ... 25))) == "98190102030405060708090a0b0c0d0e0f101112131415161718181819")
        #expect(cborHex(try encode([String: Int]())) == "a0")
        struct AB: Encodable { var a = 1; var b = [2, 3] }
        #expect(cborHex(try encode(AB())) == "a26161016162820203")
        struct Letters: Encodable { var a = "A", b = "B", c = "C", d = "D", e = "E" }
        #expect(cborHex(try encode(Letters())) == "a56161614161626142616361436164614461656145")
        #expect(cborHex(try encode([[1], [2, 3]])) == "828101820203")
    }

    @Test func tags() throws {
        #expect(cborHex(try encode(Date(timeIntervalSince1970: 1_363_896_240))) == "c1fb41d452d9ec000000")
        #expect(cborHex(try encode(Date(timeIntervalSince1970: 1_363_896_240.5))) == "c1fb41d452d9ec200000")
        #expect(cborHex(try encode(URL(string: "http://www.example.com"))) == "d82076687474703a2f2f7777772e6578616d706c652e636f6d")
        #expect(cborHex(try encode(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"))) == "d82550e621e1f8c36c495a93fc0c247a3e6e5f")
        // What cbor2 writes for decimal.Decimal("1234.56"), and RFC 8949's 273.15.
        #expect(cborHex(try encode(Decimal(string: "1234.56"))) == "c482211a0001e240")
        #expect(cborHex(try encode(Decimal(string: "273.15"))) == "c48221196ab3")
        #expect(cborHex(try encode(Decimal(string: "-1.50"))) == "c482202e")
        #expect(cborHex(try encode(Decimal(0))) == "c4820000")
        #expect(cborHex(try encode(Decimal.nan)) == "fb7ff8000000000000")
        // 38 nines need 127 bits: a positive bignum, as cbor2 writes it.
        #expect(cborHex(try encode(Decimal(string: "99999999999999999999999999999999999999"))) == "c48200c2504b3b4ca85a86c47a098a223fffffffff")
    }

    @Test func decodesAppendixAFloats() throws {
        let cases: [(String, Double)] = [
            ("f90000", 0.0), ("f98000", -0.0), ("f93c00", 1.0), ("fb3ff199999999999a", 1.1), ("f93e00", 1.5),
            ("f97bff", 65504.0), ("fa47c35000", 100000.0), ("fa7f7fffff", 3.4028234663852886e+38),
            ("f90001", 5.960464477539063e-8), ("f90400", 0.00006103515625), ("f9c400", -4.0),
            ("f97c00", .infinity), ("f9fc00", -.infinity), ("fa7f800000", .infinity), ("fbfff0000000000000", -.infinity),
        ]
        for (input, expected) in cases {
            let value = try CBORDecoder().decode(Double.self, from: bytes(input))
            #expect(value == expected && value.sign == expected.sign, "\(input)")
        }
        #expect(try CBORDecoder().decode(Double.self, from: bytes("f97e00")).isNaN)
        #expect(try CBORDecoder().decode(Double.self, from: bytes("fa7fc00000")).isNaN)
        #expect(try CBORDecoder().decode(Float.self, from: bytes("fa47c35000")) == 100000)
        #expect(try CBORDecoder().decode(Float.self, from: bytes("fb3ff8000000000000")) == 1.5)
    }

    @Test func decodesIndefiniteLengths() throws {
        #expect(try CBORDecoder().decode(Data.self, from: bytes("5f42010243030405ff")) == Data([1, 2, 3, 4, 5]))
        #expect(try CBORDecoder().decode(String.self, from: bytes("7f657374726561646d696e67ff")) == "streaming")
        #expect(try CBORDecoder().decode([Int].self, from: bytes("9fff")) == [])
        #expect(try CBORValue.decode(bytes("9f018202039f0405ffff")) ==
                .array([.unsigned(1), .array([.unsigned(2), .unsigned(3)]), .array([.unsigned(4), .unsigned(5)])]))
        #expect(try CBORDecoder().decode([[Int]].self, from: bytes("9f8101820203ff")) == [[1], [2, 3]])
        struct AB: Decodable, Equatable { var a: Int; var b: [Int] }
        #expect(try CBORDecoder().decode(AB.self, from: bytes("bf61610161629f0203ffff")) == AB(a: 1, b: [2, 3]))
        #expect(try CBORValue.decode(bytes("bf6346756ef563416d7421ff")) ==
                .map([CBORMapEntry(key: .text("Fun"), value: .bool(true)), CBORMapEntry(key: .text("Amt"), value: .negative(1))]))
        // A chunked key in a keyed container.
        #expect(try CBORDecoder().decode([String: Int].self, from: bytes("a17f61616162ff07")) == ["ab": 7])
    }

    @Test func decodesDatesInEveryForm() throws {
        let expected = Date(timeIntervalSince1970: 1_363_896_240)
        #expect(try CBORDecoder().decode(Date.self, from: bytes("c11a514b67b0")) == expected)
        #expect(try CBORDecoder().decode(Date.self, from: bytes("c1fb41d452d9ec200000")) == expected + 0.5)
        #expect(try CBORDecoder().decode(Date.self, from: bytes("c074323031332d30332d32315432303a30343a30305a")) == expected)
        #expect(try CBORDecoder().decode(Date.self, from: bytes("c13a0000000f")) == Date(timeIntervalSince1970: -16))
        #expect(try CBORDecoder().decode(Date.self, from: bytes("c1f93c00")) == Date(timeIntervalSince1970: 1))
        // Self-described CBOR (tag 55799) around a date.
        #expect(try CBORDecoder().decode(Date.self, from: bytes("d9d9f7c11a514b67b0")) == expected)
        let cases: [(String, Double)] = [
            ("2013-03-21T20:04:00Z", 1_363_896_240), ("2013-03-21T22:04:00.5+02:00", 1_363_896_240.5),
            ("1969-12-31T23:59:59.75-00:00", -0.25), ("2000-02-29t00:00:00z", 951_782_400),
            ("2024-03-01T12:30:15.250000+09:00", 1_709_263_815.25), ("0001-01-01T00:00:00Z", -62_135_596_800),
        ]
        for (text, seconds) in cases {
            let value = CBORValue.tagged(0, .text(text)).encoded()
            #expect(try CBORDecoder().decode(Date.self, from: value) == Date(timeIntervalSince1970: seconds), "\(text)")
        }
        for bad in ["2013-02-29T00:00:00Z", "2013-03-21T20:04:00", "2013-03-21 20:04", "2013-13-01T00:00:00Z", "2013-03-21T20:04:00.Z"] {
            expectError(Date.self, CBORValue.tagged(0, .text(bad)).encoded(), .invalidValue)
        }
        expectError(Date.self, bytes("1a514b67b0"), .typeMismatch)    // no tag
        expectError(Date.self, bytes("c21a514b67b0"), .typeMismatch)  // wrong tag
    }

    @Test func decodesBignumsIntoIntegers() throws {
        #expect(try CBORDecoder().decode(UInt64.self, from: bytes("c248000000000000ffff")) == 65535)
        #expect(try CBORDecoder().decode(UInt64.self, from: bytes("c248ffffffffffffffff")) == .max)
        #expect(try CBORDecoder().decode(Int64.self, from: bytes("c3487fffffffffffffff")) == .min)
        #expect(try CBORDecoder().decode(Int.self, from: bytes("c240")) == 0)
        expectError(UInt64.self, bytes("c249010000000000000000"), .outOfRange)   // 2^64
        expectError(Int64.self, bytes("c3488000000000000000"), .outOfRange)     // -2^63 - 1
        #expect(try CBORValue.decode(bytes("c249010000000000000000")) == .tagged(2, .bytes([1, 0, 0, 0, 0, 0, 0, 0, 0])))
    }

    @Test func diagnosticNotation() throws {
        let value = try CBORValue.decode(bytes("a26161830120f93e0062c2a1c1d8254401ff0a0b"))
        #expect(value.description == "{\"a\": [1, -1, 1.5], \"¡\": 1(37(h'01ff0a0b'))}")
        #expect(CBORValue.float(.nan).description == "NaN")
        #expect(CBORValue.array([.null, .undefined, .simple(16), .bool(false), .text("a\n\"")]).description
                == "[null, undefined, simple(16), false, \"a\\n\\\"\"]")
    }

    @Test func valueTreeRoundTrips() throws {
        let value = CBORValue.map([
            CBORMapEntry(key: .unsigned(1), value: .array([.negative(0), .bytes([]), .text("ü"), .float(-0.0), .simple(255)])),
            CBORMapEntry(key: .text("t"), value: .tagged(CBORTag.uuid, .bytes(Array(repeating: 7, count: 16)))),
            CBORMapEntry(key: .negative(5), value: .map([])),
            CBORMapEntry(key: .bool(true), value: .undefined),
            CBORMapEntry(key: .float(.nan), value: .null),
        ])
        let encoded = value.encoded()
        #expect(try CBORValue.decode(encoded) == value)
        #expect(try encoded.withUnsafeBytes { try CBORValue.decode($0) } == value)
        #expect(value == value && CBORValue.float(0.0) != .float(-0.0))
        #expect(Set([value, value]).count == 1)
    }
}

// MARK: - Round trips

@Suite("CBOR round trips")
struct CBORRoundTripTests {
    @Test func nestedStruct() throws {
        let decoded = try roundTrip(Person.sample)
        #expect(decoded == Person.sample)
        // Raw-buffer entry point.
        let encoded = try encode(Person.sample)
        let fromBuffer = try encoded.withUnsafeBytes { try CBORDecoder().decode(Person.self, from: $0) }
        #expect(fromBuffer == Person.sample)
        // The keys are the property names, in declaration order; `nickname` (nil) is left out by
        // the synthesized encode(to:), which uses encodeIfPresent.
        guard case .map(let entries) = try CBORValue.decode(encoded) else {
            Issue.record("expected a map")
            return
        }
        #expect(entries.map(\.key).first == .text("name"))
        #expect(!entries.contains { $0.key == .text("nickname") })
        #expect(entries.count == 19)
    }

    @Test func optionalsAndEnums() throws {
        #expect(try roundTrip(Int?.some(5)) == 5)
        #expect(try roundTrip(Int?.none) == nil)
        #expect(try roundTrip([String?]([nil, "a", nil])) == [nil, "a", nil])
        #expect(try roundTrip(Int??.some(nil)) == Int??.none)   // double optionals flatten, as in JSON
        #expect(try roundTrip([Shape.point, .circle(radius: -1), .rect(width: 0, height: .infinity)]) ==
                [.point, .circle(radius: -1), .rect(width: 0, height: .infinity)])
        #expect(try roundTrip(Status.active) == .active)
        #expect(try roundTrip(["k": [1: [Status.retired]]]) == ["k": [1: [.retired]]])
        #expect(try roundTrip(Set(["a", "b", "c"])) == ["a", "b", "c"])
        let bigDictionary = Dictionary(uniqueKeysWithValues: (0 ..< 500).map { ("key\($0)", $0) })
        #expect(try roundTrip(bigDictionary) == bigDictionary)
        let addressKeyed = [Address(street: "s", zip: nil, tags: []): 1]   // non-String keys: an array of pairs
        #expect(try roundTrip(addressKeyed) == addressKeyed)
    }

    @Test func classesWithSuperEncoder() throws {
        let dog = try roundTrip(Dog(name: "Rex", legs: 4, breed: "Collie"))
        #expect(dog.name == "Rex" && dog.legs == 4 && dog.breed == "Collie")
        #expect(try CBORValue.decode(encode(Dog(name: "Rex", legs: 4, breed: "Collie"))).description ==
                "{\"breed\": \"Collie\", \"super\": {\"name\": \"Rex\", \"legs\": 4}}")

        let cat = try roundTrip(Cat(name: "Tom", legs: 3, lives: [9, 8, 7, 6]))
        #expect(cat.name == "Tom" && cat.legs == 3 && cat.lives == [9, 8, 7, 6])
        #expect(try CBORValue.decode(encode(Cat(name: "Tom", legs: 3, lives: [9, 8, 7, 6]))).description ==
                "{\"parent\": {\"name\": \"Tom\", \"legs\": 3}, \"lives\": [9, 8, 7, 6]}")
        // A missing super key decodes as null, so the superclass init fails with a clear error.
        let error = expectError(Dog.self, try encode(["breed": "Pug"]), .valueNotFound)
        #expect(error?.codingPath == "super")
    }

    @Test func integerWidthsAtTheirLimits() throws {
        #expect(try roundTrip(Widths.min) == .min)
        #expect(try roundTrip(Widths.max) == .max)
        #expect(try roundTrip([Int8.min, -1, 0, 1, .max]) == [Int8.min, -1, 0, 1, .max])
        #expect(try roundTrip([Int16.min, .max]) == [Int16.min, .max])
        #expect(try roundTrip([Int32.min, .max]) == [Int32.min, .max])
        #expect(try roundTrip([Int64.min, .max]) == [Int64.min, .max])
        #expect(try roundTrip([Int.min, .max]) == [Int.min, .max])
        #expect(try roundTrip([UInt8.max, UInt8.min]) == [.max, .min])
        #expect(try roundTrip([UInt16.max]) == [.max])
        #expect(try roundTrip([UInt32.max]) == [.max])
        #expect(try roundTrip([UInt64.max, 0]) == [.max, 0])
        #expect(try roundTrip([UInt.max]) == [.max])
        #expect(try roundTrip(Int16.min) == .min)
        #expect(try roundTrip(UInt16.max) == .max)
        #expect(try roundTrip(Int8.min) == .min)
    }

    @Test func doubleSpecialValues() throws {
        let doubles: [Double] = [0, -0.0, .infinity, -.infinity, .leastNonzeroMagnitude, -.leastNormalMagnitude,
                                 .greatestFiniteMagnitude, .pi, 0.1, 0x1p-1030, .ulpOfOne]
        let decoded = try roundTrip(doubles)
        for (a, b) in zip(doubles, decoded) { #expect(a.bitPattern == b.bitPattern, "\(a)") }
        #expect(try roundTrip(Double.nan).isNaN)
        #expect(try roundTrip(Double.signalingNaN).isNaN)
        let floats: [Float] = [0, -0.0, .infinity, -.infinity, .leastNonzeroMagnitude, .greatestFiniteMagnitude, 0.1, .pi]
        let decodedFloats = try roundTrip(floats)
        for (a, b) in zip(floats, decodedFloats) { #expect(a.bitPattern == b.bitPattern, "\(a)") }
        #expect(try roundTrip(Float.nan).isNaN)
    }

    @Test func datesRoundTripExactly() throws {
        var generator = SplitMix64(seed: 0xDA7E)
        var dates: [Date] = [Date(), .distantPast, .distantFuture, Date(timeIntervalSince1970: 0),
                             Date(timeIntervalSinceReferenceDate: 0), Date(timeIntervalSinceReferenceDate: -0.0),
                             Date(timeIntervalSinceReferenceDate: .leastNonzeroMagnitude),
                             Date(timeIntervalSinceReferenceDate: .greatestFiniteMagnitude)]
        for _ in 0 ..< 2000 {
            dates.append(Date() + Double.random(in: -1e6 ... 1e6, using: &generator))
            dates.append(Date(timeIntervalSinceReferenceDate: Double.random(in: -1e10 ... 1e10, using: &generator)))
            let bits = Double(bitPattern: generator.next())
            if bits.isFinite { dates.append(Date(timeIntervalSinceReferenceDate: bits)) }
        }
        var epochTags = 0
        var referenceTags = 0
        for date in dates {
            let encoded = try encode(date)
            let decoded = try CBORDecoder().decode(Date.self, from: encoded)
            #expect(decoded == date, "\(date.timeIntervalSinceReferenceDate)")
            if case .tagged(let tag, _) = try CBORValue.decode(encoded) {
                if tag == CBORTag.epochDate { epochTags += 1 }
                if tag == CBORTag.referenceDate { referenceTags += 1 }
            }
        }
        #expect(epochTags + referenceTags == dates.count)
        #expect(epochTags > 0 && referenceTags > 0, "both tags are exercised: \(epochTags) / \(referenceTags)")
        // Dates inside containers too.
        #expect(try roundTrip(dates) == dates)
        let keyed = ["d": dates[0]]
        #expect(try roundTrip(keyed) == keyed)
    }

    @Test func decimalsRoundTripExactly() throws {
        let texts = ["1234.56", "0.1", "-0.000001", "99999999999999999999999999999999999999", "-99999999999999999999999999999999999999",
                     "340282366920938463463374607431768211455", "-340282366920938463463374607431768211455", "0", "1", "-1",
                     "100", "1.50", "18446744073709551615", "18446744073709551616", "-18446744073709551616", "-18446744073709551617",
                     "1e127", "-1e127", "1e-128", "12.3e-120", "0.00000000000000000001", "3.14159265358979323846264338327950288"]
        var decimals = texts.compactMap { Decimal(string: $0, locale: Locale(identifier: "en_US_POSIX")) }
        #expect(decimals.count == texts.count)
        var generator = SplitMix64(seed: 0xDEC1)
        for _ in 0 ..< 3000 {
            let digitCount = Int.random(in: 1 ... 38, using: &generator)
            var digits = String((0 ..< digitCount).map { _ in Character(String(Int.random(in: 0 ... 9, using: &generator))) })
            if Bool.random(using: &generator) { digits = "-" + digits }
            let exponent = Int.random(in: -40 ... 40, using: &generator)
            if let value = Decimal(string: "\(digits)e\(exponent)", locale: Locale(identifier: "en_US_POSIX")), !value.isNaN {
                decimals.append(value)
            }
        }
        #expect(decimals.count > 3000)
        for decimal in decimals {
            let decoded = try roundTrip(decimal)
            #expect(decoded == decimal && decoded.description == decimal.description, "\(decimal) became \(decoded)")
        }
        #expect(try roundTrip(decimals) == decimals)
        #expect(try roundTrip(Decimal.nan).isNaN)
        // Equal decimals encode equally (trailing zeros go into the exponent).
        #expect(try encode(Decimal(string: "1.5")) == encode(Decimal(string: "1.500")))
        #expect(try encode(Decimal(string: "100")) == encode(Decimal(100)))
    }

    @Test func decimalsFromOtherForms() throws {
        #expect(try CBORDecoder().decode(Decimal.self, from: bytes("c482213903e7")) == Decimal(string: "-10.00"))
        #expect(try CBORDecoder().decode(Decimal.self, from: bytes("c49f2119012cff")) == Decimal(string: "3"))
        #expect(try CBORDecoder().decode(Decimal.self, from: bytes("1864")) == 100)
        #expect(try CBORDecoder().decode(Decimal.self, from: bytes("fb3fb999999999999a")) == Decimal(string: "0.1"))
        #expect(try CBORDecoder().decode(Decimal.self, from: bytes("f97e00")).isNaN)
        // [200, 1] (1e200) does not fit; [130, 1] does after moving zeros into the mantissa.
        expectError(Decimal.self, CBORValue.tagged(4, .array([.unsigned(200), .unsigned(1)])).encoded(), .outOfRange)
        #expect(try CBORDecoder().decode(Decimal.self, from: CBORValue.tagged(4, .array([.unsigned(130), .unsigned(1)])).encoded())
                == Decimal(string: "1000e127", locale: nil))
        #expect(try CBORDecoder().decode(Decimal.self, from: CBORValue.tagged(4, .array([.negative(128), .unsigned(100)])).encoded())
                == Decimal(string: "1e-127", locale: nil))
        expectError(Decimal.self, CBORValue.tagged(4, .array([.negative(200), .unsigned(1)])).encoded(), .outOfRange)
        expectError(Decimal.self, CBORValue.tagged(4, .array([.unsigned(0), .tagged(2, .bytes(Array(repeating: 1, count: 17)))])).encoded(), .outOfRange)
        expectError(Decimal.self, CBORValue.tagged(4, .array([.unsigned(0)])).encoded(), .invalidValue)
        expectError(Decimal.self, CBORValue.tagged(4, .array([.text("x"), .unsigned(1)])).encoded(), .invalidValue)
        expectError(Decimal.self, bytes("fb7ff0000000000000"), .outOfRange)
    }

    @Test func uuidURLAndDataEverywhere() throws {
        struct Bag: Codable, Equatable {
            var id: UUID
            var ids: [UUID]
            var url: URL
            var urls: [String: URL]
            var data: Data
            var chunks: [Data?]
            var maybe: UUID?
        }
        var generator = SplitMix64(seed: 0x0BAD)
        let ids = (0 ..< 50).map { _ in UUID() }
        let chunks: [Data?] = (0 ..< 20).map { i in
            i % 5 == 0 ? nil : Data((0 ..< Int(generator.next() % 300)).map { _ in UInt8(truncatingIfNeeded: generator.next()) })
        }
        let bag = Bag(id: UUID(), ids: ids, url: URL(string: "file:///tmp/a%20b.txt") ?? URL(fileURLWithPath: "/"),
                      urls: ["home": URL(string: "https://例え.jp/パス?q=1") ?? URL(fileURLWithPath: "/")],
                      data: Data(), chunks: chunks, maybe: nil)
        #expect(try roundTrip(bag) == bag)
        #expect(try roundTrip(ids[0]) == ids[0])
        #expect(try roundTrip(Data(repeating: 0xAB, count: 70_000)) == Data(repeating: 0xAB, count: 70_000))
        // UUIDs as bare bytes or text, URLs as bare text.
        #expect(try CBORDecoder().decode(UUID.self, from: CBORValue.text(ids[1].uuidString).encoded()) == ids[1])
        #expect(try CBORDecoder().decode(UUID.self, from: CBORValue.bytes(withUnsafeBytes(of: ids[2].uuid) { Array($0) }).encoded()) == ids[2])
        #expect(try CBORDecoder().decode(URL.self, from: CBORValue.text("https://x.y/z").encoded()) == URL(string: "https://x.y/z"))
        expectError(UUID.self, CBORValue.tagged(37, .bytes([1, 2, 3])).encoded(), .invalidValue)
    }

    @Test func userInfoReachesCodableTypes() throws {
        struct Probe: Codable {
            init() {}
            init(from decoder: any Decoder) throws {
                #expect(decoder.userInfo[CodingUserInfoKey(rawValue: "k")!] as? Int == 7)
                _ = try decoder.singleValueContainer().decode(Int.self)
            }
            func encode(to encoder: any Encoder) throws {
                #expect(encoder.userInfo[CodingUserInfoKey(rawValue: "k")!] as? Int == 7)
                var container = encoder.singleValueContainer()
                try container.encode(1)
            }
        }
        var encoder = CBOREncoder()
        encoder.userInfo[CodingUserInfoKey(rawValue: "k")!] = 7
        var decoder = CBORDecoder()
        decoder.userInfo[CodingUserInfoKey(rawValue: "k")!] = 7
        _ = try decoder.decode(Probe.self, from: encoder.encode(Probe()))
    }

    @Test func repeatedKeysAreReplacedNotDuplicated() throws {
        struct Twice: Encodable {
            enum K: String, CodingKey { case a, b }
            func encode(to encoder: any Encoder) throws {
                var container = encoder.container(keyedBy: K.self)
                try container.encode(1, forKey: .a)
                try container.encode(2, forKey: .b)
                try container.encode(3, forKey: .a)
            }
        }
        #expect(cborHex(try encode(Twice())) == "a2616103616202")
        struct Nothing: Encodable { func encode(to encoder: any Encoder) throws {} }
        let error = #expect(throws: CBORError.self) { try encode(Nothing()) }
        #expect(error?.kind == .unencodable)
        #expect(try CBORValue.decode(encode([Nothing()])) == .array([.map([])]))
    }
}

// MARK: - Lenient decoding and errors

@Suite("CBOR decoding rules")
struct CBORDecodingRuleTests {
    @Test func numbersConvertOnlyWhenExact() throws {
        #expect(try CBORDecoder().decode(Double.self, from: bytes("1903e8")) == 1000)
        #expect(try CBORDecoder().decode(Double.self, from: bytes("3903e7")) == -1000)
        #expect(try CBORDecoder().decode(Double.self, from: bytes("1b0020000000000000")) == 9_007_199_254_740_992)
        expectError(Double.self, bytes("1b0020000000000001"), .outOfRange)  // 2^53 + 1
        #expect(try CBORDecoder().decode(Float.self, from: bytes("1a01000000")) == 16_777_216)
        expectError(Float.self, bytes("1a01000001"), .outOfRange)
        expectError(Float.self, bytes("fb47f0000000000000"), .outOfRange)      // 2^128, too big for Float
        #expect(try CBORDecoder().decode(Int.self, from: bytes("f94000")) == 2)
        #expect(try CBORDecoder().decode(Int.self, from: bytes("fbc059000000000000")) == -100)
        #expect(try CBORDecoder().decode(UInt8.self, from: bytes("fa437f0000")) == 255)
        expectError(Int.self, bytes("f93e00"), .typeMismatch)                 // 1.5
        expectError(UInt8.self, bytes("fa43800000"), .outOfRange)             // 256.0
        expectError(Int.self, bytes("f97e00"), .typeMismatch)                 // NaN
        expectError(Int64.self, bytes("fb43e0000000000000"), .outOfRange)     // 2^63
    }

    @Test func narrowingOverflowIsAnError() throws {
        let error = expectError(UInt8.self, bytes("190100"), .outOfRange)
        #expect(error?.description == "value out of range at byte 0: 256 does not fit in UInt8")
        expectError(Int8.self, bytes("1880"), .outOfRange)
        expectError(Int8.self, bytes("3880"), .outOfRange)                    // -129
        #expect(try CBORDecoder().decode(Int8.self, from: bytes("387f")) == -128)
        expectError(UInt.self, bytes("20"), .outOfRange)
        expectError(Int64.self, bytes("1b8000000000000000"), .outOfRange)
        expectError(Int64.self, bytes("3b8000000000000000"), .outOfRange)
        struct Small: Decodable { var v: Int16 }
        let nested = expectError(Small.self, CBORValue.map([CBORMapEntry(key: .text("v"), value: .unsigned(40000))]).encoded(), .outOfRange)
        #expect(nested?.codingPath == "v")
        #expect(nested?.offset == 3)
    }

    @Test func nullAndUndefinedAreNil() throws {
        struct Opt: Decodable, Equatable { var a: Int?; var b: String?; var c: [Int?] }
        let input = CBORValue.map([
            CBORMapEntry(key: .text("a"), value: .null),
            CBORMapEntry(key: .text("b"), value: .undefined),
            CBORMapEntry(key: .text("c"), value: .array([.undefined, .unsigned(1), .null])),
        ]).encoded()
        #expect(try CBORDecoder().decode(Opt.self, from: input) == Opt(a: nil, b: nil, c: [nil, 1, nil]))
        #expect(try CBORDecoder().decode(Int?.self, from: [0xF7]) == nil)
        let error = expectError(Int.self, [0xF6], .valueNotFound)
        #expect(error?.reason == "expected Int, found null")
    }

    @Test func integerKeysBecomeDecimalStrings() throws {
        let input = CBORValue.map([
            CBORMapEntry(key: .unsigned(1), value: .text("one")),
            CBORMapEntry(key: .negative(1), value: .text("minus two")),
            CBORMapEntry(key: .negative(.max), value: .text("min")),
        ]).encoded()
        expectError([Int: String].self, input, .typeMismatch)   // -18446744073709551616 is no Int
        let small = CBORValue.map([CBORMapEntry(key: .unsigned(1), value: .text("one")), CBORMapEntry(key: .negative(1), value: .text("minus two"))])
        #expect(try CBORDecoder().decode([Int: String].self, from: small.encoded()) == [1: "one", -2: "minus two"])
        let strings = try CBORDecoder().decode([String: String].self, from: input)
        #expect(strings == ["1": "one", "-2": "minus two", "-18446744073709551616": "min"])
        struct Numbered: Decodable, Equatable {
            var one: String
            enum CodingKeys: String, CodingKey { case one = "1" }
        }
        #expect(try CBORDecoder().decode(Numbered.self, from: input) == Numbered(one: "one"))
        expectError([String: String].self, CBORValue.map([CBORMapEntry(key: .float(1), value: .null)]).encoded(), .typeMismatch)
    }

    @Test func tagsAreSkippedWhereTheTypeWantsNone() throws {
        #expect(try CBORDecoder().decode(String.self, from: bytes("d82076687474703a2f2f7777772e6578616d706c652e636f6d")) == "http://www.example.com")
        #expect(try CBORDecoder().decode([Int].self, from: bytes("d9d9f7820102")) == [1, 2])
        struct A: Decodable, Equatable { var a: Int }
        #expect(try CBORDecoder().decode(A.self, from: bytes("d9d9f7a1616101")) == A(a: 1))
    }

    /// A keyed container passes over the values of keys it does not know, whatever they hold: nested
    /// definite and indefinite containers, tags, strings in chunks, floats. The field after them is
    /// found where it is.
    @Test func unknownFieldsOfEveryShapeAreSkipped() throws {
        struct Z: Decodable, Equatable { var z: Int }
        // {"a": [1, {"b": [_ 2, 3], "c": 1(4)}, h'0102', 1.5], "d": (_ "x", "y"), "e": [_ {_ "f": []}],
        //  "g": (_ h'01', h'0203'), "z": 9}
        let input = bytes("a5" + "6161" + "8401" + "a2" + "6162" + "9f0203ff" + "6163" + "c104" + "420102" + "f93e00"
                          + "6164" + "7f61786179ff"
                          + "6165" + "9fbf616680ffff"
                          + "6167" + "5f41014202" + "03ff"
                          + "617a" + "09")
        #expect(try CBORDecoder().decode(Z.self, from: input) == Z(z: 9))
        // The same map with its last key's value cut short is truncated input, not a trap.
        #expect(throws: CBORError.self) { _ = try CBORDecoder().decode(Z.self, from: Array(input.dropLast())) }
    }

    /// Text is checked once, then copied: valid non-ASCII text round-trips, invalid text is refused
    /// naming the byte, in values and in map keys.
    @Test func textIsCheckedWhereItIsRead() throws {
        let memo = String(repeating: "今日は集中できた。", count: 40) + "✓ ok"
        #expect(try CBORDecoder().decode(String.self, from: CBOREncoder().encode(memo)) == memo)
        #expect(try CBORDecoder().decode([String: String].self, from: CBOREncoder().encode(["日本": memo])) == ["日本": memo])
        for bad in ["62e381", "63616280", "62c0af"] {   // a cut sequence, a lone continuation byte, an overlong form
            #expect { _ = try CBORDecoder().decode(String.self, from: bytes(bad)) } throws: { error in
                (error as? CBORError)?.kind == .invalidUTF8
            }
            #expect { _ = try CBORDecoder().decode([String: Int].self, from: bytes("a1" + bad + "01")) } throws: { error in
                (error as? CBORError)?.kind == .invalidUTF8
            }
        }
    }

    @Test func wrongTypesGiveOneLineErrors() throws {
        struct Item: Decodable { var count: Int }
        struct Order: Decodable { var items: [Item] }
        let input = try encode(["items": [["count": CBORValueBox.int(1)], ["count": .text("five")]]])
        let error = expectError(Order.self, input, .typeMismatch)
        #expect(error?.codingPath == "items[1].count")
        #expect(error?.description.hasPrefix("type mismatch at byte ") == true)
        #expect(error?.description.hasSuffix(" in items[1].count: expected Int, found text string (4 bytes)") == true)

        let missing = expectError(Item.self, try encode(["other": 1]), .keyNotFound)
        #expect(missing?.description == "key not found at byte 0: no value for key \"count\"")
        expectError(Item.self, try encode([1, 2]), .typeMismatch)
        expectError([Int].self, try encode(["a": 1]), .typeMismatch)
        expectError([Int].self, try encode([1, 2] as [Int?] + [nil]), .valueNotFound)
        expectError(String.self, try encode(Data([1])), .typeMismatch)
        expectError(Data.self, try encode("x"), .typeMismatch)
        expectError(Bool.self, try encode(1), .typeMismatch)
        struct Two: Decodable {
            var a: Int, b: Int
            init(from decoder: any Decoder) throws {
                var container = try decoder.unkeyedContainer()
                a = try container.decode(Int.self)
                b = try container.decode(Int.self)
            }
        }
        let short = expectError(Two.self, try encode([1]), .valueNotFound)
        #expect(short?.codingPath == "[1]")
    }

    @Test func userDecodingErrorsBecomeCBORErrors() throws {
        struct Picky: Decodable {
            init(from decoder: any Decoder) throws {
                let container = try decoder.singleValueContainer()
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "never happy\nat all")
            }
        }
        let error = expectError(Picky.self, [0x01], .invalidValue)
        #expect(error?.reason == "never happy\\nat all")
        struct Mine: Error {}
        struct Throws: Decodable { init(from decoder: any Decoder) throws { throw Mine() } }
        #expect(throws: Mine.self) { try CBORDecoder().decode(Throws.self, from: [0x01]) }
        // Codable code can still catch DecodingError inside init(from:).
        struct Defaulted: Decodable {
            var value: Int
            enum CodingKeys: CodingKey { case value }
            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                do { value = try container.decode(Int.self, forKey: .value) } catch DecodingError.keyNotFound { value = -1 }
            }
        }
        #expect(try CBORDecoder().decode(Defaulted.self, from: encode([String: Int]())).value == -1)
    }

    @Test func malformedInputIsRejected() throws {
        let error = expectError(String.self, bytes("7828") + Array("abc".utf8), .truncated)
        #expect(error?.description == "truncated input at byte 0: text string needs 40 bytes, 3 remain")
        expectError(Int.self, [], .truncated)
        expectError(Int.self, bytes("19"), .truncated)
        expectError(Int.self, bytes("1c"), .malformed)                       // reserved 28
        expectError(Int.self, bytes("1d"), .malformed)                       // reserved 29
        expectError(Int.self, bytes("fe"), .malformed)                       // reserved 30
        expectError(Int.self, bytes("ff"), .malformed)                       // stray break
        expectError([Int].self, bytes("8201ff"), .malformed)                 // break in a definite array
        expectError(Int.self, bytes("1f"), .malformed)                       // indefinite integer
        expectError(Int.self, bytes("df01"), .malformed)                     // indefinite tag
        expectError(Int.self, bytes("f800"), .malformed)                     // two-byte simple value below 32
        expectError(Int.self, bytes("0101"), .trailingBytes)
        expectError(String.self, bytes("62c328"), .invalidUTF8)
        expectError(String.self, bytes("63eda080"), .invalidUTF8)            // surrogate
        expectError(String.self, bytes("7f61e1ff"), .invalidUTF8)            // chunk that is not UTF-8 on its own
        expectError(String.self, bytes("7f4161ff"), .malformed)              // byte-string chunk in a text string
        expectError(String.self, bytes("7f6161"), .truncated)                // no break
        expectError([Int].self, bytes("9f01"), .truncated)
        expectError([String: Int].self, bytes("bf6161016162ff"), .malformed) // key without value
        let duplicate = expectError([String: Int].self, bytes("a2616101616102"), .duplicateKey)
        #expect(duplicate?.offset == 4)
        var many = CBORValue.map((0 ..< 40).map { CBORMapEntry(key: .text("k\($0 % 39)"), value: .unsigned(1)) })
        expectError([String: Int].self, many.encoded(), .duplicateKey)
        many = .map([CBORMapEntry(key: .unsigned(1), value: .null), CBORMapEntry(key: .text("1"), value: .null)])
        expectError([String: Int?].self, many.encoded(), .duplicateKey)     // 1 and "1" are the same coding key
        #expect(throws: CBORError.self) { try CBORValue.decode(bytes("a2010101 02")) } // 1 and 1 in a value tree
    }
}

/// Decodes any CBOR through `CBORValue.decode` (a `Decodable` wrapper for the error tests).
private enum CBORValueBox: Codable {
    case int(Int), text(String)
    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let i = try? container.decode(Int.self) { self = .int(i) } else { self = .text(try container.decode(String.self)) }
    }
    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .int(let i): try container.encode(i)
        case .text(let s): try container.encode(s)
        }
    }
}

// MARK: - Limits and corrupt input

@Suite("CBOR limits and corrupt input")
struct CBORLimitTests {
    private func nestedArrays(_ depth: Int) -> [UInt8] { Array(repeating: 0x81, count: depth) + [0x00] }

    @Test func depthLimit() throws {
        #expect(try CBORDecoder().decode(Depth.self, from: nestedArrays(64)).depth == 64)
        #expect(throws: Never.self) { try CBORValue.decode(nestedArrays(64)) }
        let error = expectError(Depth.self, nestedArrays(65), .limitExceeded)
        #expect(error?.description == "limit exceeded at byte 64: nesting is deeper than maxDepth (64)")
        #expect(throws: CBORError.self) { try CBORValue.decode(nestedArrays(65)) }
        // Maps and tags count too; indefinite lengths as well.
        let maps = Array(Array(repeating: bytes("a16161"), count: 65).joined()) + [0x00]
        expectError([String: Int].self, maps, .limitExceeded)
        expectError(Int.self, Array(repeating: 0xC6, count: 65) + [0x00], .limitExceeded)
        #expect(try CBORDecoder().decode(Int.self, from: Array(repeating: 0xC6, count: 64) + [0x07]) == 7)
        expectError(Depth.self, Array(repeating: 0x9F, count: 65) + [0x00] + Array(repeating: 0xFF, count: 65), .limitExceeded)
        // Custom limits; a million levels fails fast without using the stack.
        expectError(Depth.self, nestedArrays(11), .limitExceeded, limits: CBORLimits(maxDepth: 10))
        #expect(try CBORDecoder(limits: CBORLimits(maxDepth: 200)).decode(Depth.self, from: nestedArrays(200)).depth == 200)
        expectError(Depth.self, nestedArrays(1_000_000), .limitExceeded)
        #expect(throws: CBORError.self) { try CBORValue.decode(nestedArrays(1_000_000)) }
    }

    @Test func inputSizeLimit() throws {
        let input = try encode(String(repeating: "x", count: 100))
        #expect(try CBORDecoder(limits: CBORLimits(maxInputSize: input.count)).decode(String.self, from: input).count == 100)
        let error = expectError(String.self, input, .limitExceeded, limits: CBORLimits(maxInputSize: input.count - 1))
        #expect(error?.reason == "input is 102 bytes, over the maxInputSize limit of 101")
        var huge = [UInt8](repeating: 0, count: 16 * 1024 * 1024 + 1)
        huge[0] = 0x5A   // a byte string of 16 MiB - 4 bytes, then trailing bytes: rejected for size first
        expectError(Data.self, huge, .limitExceeded)
        #expect(throws: CBORError.self) { try CBORValue.decode(huge) }
    }

    @Test func hugeDeclaredLengthsAreRejectedBeforeAllocating() throws {
        let clock = ContinuousClock()
        let elapsed = clock.measure {
            for head in ["5bffffffffffffffff", "7bffffffffffffffff", "9bffffffffffffffff", "bbffffffffffffffff",
                         "5b7fffffffffffffff", "9b0000000100000000", "bb4000000000000000", "5affffffff"] {
                let input = bytes(head)
                let error = expectError(CBORValueBox.self, input, .truncated)
                #expect(error?.offset == 0)
                #expect(throws: CBORError.self) { try CBORValue.decode(input) }
                #expect(throws: CBORError.self) { try CBORDecoder().decode([Int].self, from: input) }
            }
            let error = #expect(throws: CBORError.self) { try CBORValue.decode(bytes("9bffffffffffffffff")) }
            #expect(error?.reason == "array declares 18446744073709551615 items, but only 0 bytes remain")
        }
        #expect(elapsed < .seconds(1))
    }

    @Test func corruptInputNeverTraps() throws {
        let original = try encode(Person.sample)
        var generator = SplitMix64(seed: 0xC0FFEE)
        var decodedCount = 0
        var failedCount = 0
        let limits = CBORLimits(maxInputSize: 1 << 20, maxDepth: 16)
        for iteration in 0 ..< 6000 {
            var input = original
            switch iteration % 6 {
            case 0:
                input.removeLast(Int(generator.next() % UInt64(input.count)) + 1)           // truncate
            case 1:
                for _ in 0 ... generator.next() % 4 {                                      // overwrite bytes
                    input[Int(generator.next() % UInt64(input.count))] = UInt8(truncatingIfNeeded: generator.next())
                }
            case 2:
                let i = Int(generator.next() % UInt64(input.count))                       // flip one bit
                input[i] ^= 1 << UInt8(generator.next() % 8)
            case 3:
                input.insert(UInt8(truncatingIfNeeded: generator.next()), at: Int(generator.next() % UInt64(input.count)))
            case 4:
                input.remove(at: Int(generator.next() % UInt64(input.count)))
            default:                                                                       // random bytes
                input = (0 ..< generator.next() % 64).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            }
            do {
                _ = try CBORDecoder(limits: limits).decode(Person.self, from: input)
                decodedCount += 1
            } catch let error as CBORError {
                failedCount += 1
                #expect(!error.description.isEmpty && !error.description.contains("\n"))
            } catch {
                Issue.record("unexpected error type \(type(of: error)): \(error)")
            }
            // Anything that decodes as a value tree re-encodes to a tree that decodes to itself.
            if let value = try? CBORValue.decode(input, limits: limits) {
                #expect(try CBORValue.decode(value.encoded(), limits: limits) == value)
            }
            _ = try? CBORDecoder(limits: limits).decode([String: CBORValueBox].self, from: input)
        }
        #expect(failedCount > 3000)
        #expect(decodedCount + failedCount == 6000)
    }
}

// MARK: - Python interop

/// What Swift encodes for `cbor_interop.py decode` to check.
private struct InteropOut: Encodable {
    struct Child: Encodable { var name = "x"; var tags = ["t"] }
    var int = 42
    var negative = -1_234_567_890_123
    var int64Max = Int64.max
    var int64Min = Int64.min
    var uint64Max = UInt64.max
    var double = 3.25
    var text = "こんにちは、世界 🌏"
    var flag = true
    var nothing: Int? = nil
    var data = Data([0x00, 0x01, 0xFE, 0xFF])
    var date = Date(timeIntervalSince1970: 1_700_000_000.25)
    var price = Decimal(string: "1234.56") ?? 0
    var tiny = Decimal(string: "-0.000001") ?? 0
    var huge = Decimal(string: "99999999999999999999999999999999999999") ?? 0
    var id = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F") ?? UUID()
    var list = [[1, 2], [3]]
    var dict = ["a": 1, "b": 2]
    var child = Child()

    enum CodingKeys: String, CodingKey {
        case int, negative, int64Max, int64Min, uint64Max, double, text, flag, nothing, data, date, price, tiny, huge, id, list, dict, child
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(int, forKey: .int)
        try c.encode(negative, forKey: .negative)
        try c.encode(int64Max, forKey: .int64Max)
        try c.encode(int64Min, forKey: .int64Min)
        try c.encode(uint64Max, forKey: .uint64Max)
        try c.encode(double, forKey: .double)
        try c.encode(text, forKey: .text)
        try c.encode(flag, forKey: .flag)
        try c.encode(nothing, forKey: .nothing)   // null, not left out
        try c.encode(data, forKey: .data)
        try c.encode(date, forKey: .date)
        try c.encode(price, forKey: .price)
        try c.encode(tiny, forKey: .tiny)
        try c.encode(huge, forKey: .huge)
        try c.encode(id, forKey: .id)
        try c.encode(list, forKey: .list)
        // A fixed key order for the Python side's check.
        var nested = c.nestedContainer(keyedBy: CBORStringKey.self, forKey: .dict)
        for key in dict.keys.sorted() { try nested.encode(dict[key], forKey: CBORStringKey(stringValue: key)) }
        try c.encode(child, forKey: .child)
    }
}

/// What `cbor_interop.py encode` writes.
private struct InteropIn: Decodable {
    var int: Int64
    var negative: Int64
    var ratio: Double
    var half: Double
    var text: String
    var flag: Bool
    var missing: String?
    var blob: Data
    var when: Date
    var whenUTC: Date
    var whenStamp: Date
    var price: Decimal
    var tiny: Decimal
    var huge: Decimal
    var id: UUID
    var list: [[Int]]
    var dict: [String: Int]
    var intKeys: [Int: String]
}

@Suite("CBOR interop with Python's cbor2")
struct CBORInteropTests {
    private static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("Fixtures").appendingPathComponent("cbor_interop.py")

    /// Runs `python3 cbor_interop.py <arguments>` (python3 found through PATH) and returns its exit
    /// status and output; records a failure that says how to install what is missing.
    private func runPython(_ arguments: [String], sourceLocation: SourceLocation = #_sourceLocation) throws -> (status: Int32, output: String) {
        // (TestSupport's `run`, whose deadline kills a hung python3 and fails the test.)
        let result: ProcessResult
        do {
            result = try run("/usr/bin/env", ["python3", Self.script.path] + arguments, sourceLocation: sourceLocation)
        } catch {
            Issue.record("cannot run /usr/bin/env python3 (\(error)); install python3, then install cbor2: pip install cbor2", sourceLocation: sourceLocation)
            throw error
        }
        let (out, err, status) = (result.stdout, result.stderr, result.status)
        try #require(status != 127, "python3 is not on PATH; install python3, then install cbor2: pip install cbor2", sourceLocation: sourceLocation)
        try #require(status != 3 && !err.contains("No module named 'cbor2'"), "install cbor2: pip install cbor2 (python3 says: \(err.trimmingCharacters(in: .whitespacesAndNewlines)))", sourceLocation: sourceLocation)
        return (status, out + err)
    }

    private func temporaryFile() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("cbor-interop-\(UUID().uuidString).cbor")
    }

    @Test func fixtureExists() {
        #expect(FileManager.default.fileExists(atPath: Self.script.path), "missing \(Self.script.path)")
    }

    @Test(.blockingWork) func pythonReadsSwiftOutput() throws {
        let file = temporaryFile()
        defer { try? FileManager.default.removeItem(at: file) }
        try Data(try CBOREncoder().encode(InteropOut())).write(to: file)
        let (status, output) = try runPython(["decode", file.path])
        #expect(status == 0, "cbor_interop.py decode failed: \(output)")
        #expect(output.trimmingCharacters(in: .whitespacesAndNewlines) == "ok", "\(output)")
    }

    @Test(.blockingWork, arguments: ["encode", "encode-canonical", "encode-timestamp"])
    func swiftReadsPythonOutput(mode: String) throws {
        let file = temporaryFile()
        defer { try? FileManager.default.removeItem(at: file) }
        let (status, output) = try runPython([mode, file.path])
        try #require(status == 0, "cbor_interop.py \(mode) failed: \(output)")
        let bytes = [UInt8](try Data(contentsOf: file))
        let value = try CBORDecoder().decode(InteropIn.self, from: bytes)
        #expect(value.int == 4_611_686_018_427_387_911)
        #expect(value.negative == .min)
        #expect(value.ratio == 0.1)
        #expect(value.half == 1.5)
        #expect(value.text == "東京タワー")
        #expect(value.flag == false)
        #expect(value.missing == nil)
        #expect(value.blob == Data([0, 1, 2, 254, 255]))
        #expect(value.when == Date(timeIntervalSince1970: 1_709_263_815.25))
        #expect(value.whenUTC == Date(timeIntervalSinceReferenceDate: 0))
        #expect(value.whenStamp == Date(timeIntervalSince1970: 1_709_263_815.25))
        #expect(value.price == Decimal(string: "1234.56"))
        #expect(value.price.description == "1234.56")
        #expect(value.tiny == Decimal(string: "-0.000001"))
        #expect(value.huge == Decimal(string: "99999999999999999999999999999999999999"))
        #expect(value.id == UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F"))
        #expect(value.list == [[1, 2], [3]])
        #expect(value.dict == ["a": 1, "b": 2])
        #expect(value.intKeys == [1: "one", -2: "minus two"])
        if mode == "encode-canonical" {
            #expect(bytes.contains(0xF9), "canonical output has a float16 (1.5)")
        }
    }
}

@Suite("CBOR dictionaries are deterministic")
struct CBORDeterministicDictionaryTests {
    @Test("map keys are sorted shorter first, then bytewise (RFC 8949 section 4.2.1)")
    func textKeysAreSorted() throws {
        let bytes = try CBOREncoder().encode(["bb": 1, "a": 2, "c": 3, "ab": 4])
        #expect(bytes == [0xA4, 0x61, 0x61, 0x02, 0x61, 0x63, 0x03, 0x62, 0x61, 0x62, 0x04, 0x62, 0x62, 0x62, 0x01])
        // Structs keep their declaration order: only dictionaries are sorted.
        struct Fields: Codable { var zeta = 1; var alpha = 2 }
        #expect(try CBOREncoder().encode(Fields()) == [0xA2, 0x64] + Array("zeta".utf8) + [0x01, 0x65] + Array("alpha".utf8) + [0x02])
    }

    @Test("keys sharing long prefixes sort as their bytes do, at every length around 8 and 16 bytes")
    func keysSortLikeTheirBytes() throws {
        var generator = SplitMix64(seed: 7)
        for _ in 0 ..< 50 {
            var dictionary: [String: Int] = [:]
            for i in 0 ..< 40 {
                // Lengths 0...40 over a two-letter alphabet share long prefixes; some keys are not ASCII.
                let length = Int(generator.next() % 41)
                var key = String((0 ..< length).map { _ in generator.next() % 2 == 0 ? "a" : "b" })
                if generator.next() % 5 == 0 { key += "é" }
                dictionary[key] = i
            }
            guard case .map(let entries) = try CBORValue.decode(CBOREncoder().encode(dictionary)) else {
                Issue.record("not a map"); return
            }
            let written = entries.map { entry -> [UInt8] in
                guard case .text(let key) = entry.key else { return [] }
                return Array(key.utf8)
            }
            let expected = dictionary.keys.map { Array($0.utf8) }.sorted { a, b in
                a.count != b.count ? a.count < b.count : a.lexicographicallyPrecedes(b)
            }
            #expect(written == expected)
        }
    }

    @Test("dictionaries with other keys are written as pairs sorted by encoded key")
    func otherKeysAreSortedByEncodedKey() throws {
        let a = UUID(uuidString: "00000000-0000-0000-0000-000000000001")!
        let b = UUID(uuidString: "00000000-0000-0000-0000-000000000002")!
        let bytes = try CBOREncoder().encode([b: "b", a: "a"])
        let decoded = try CBORDecoder().decode([UUID: String].self, from: bytes)
        #expect(decoded == [a: "a", b: "b"])
        let value = try CBORValue.decode(bytes)
        guard case .array(let items) = value else { Issue.record("not an array: \(value)"); return }
        #expect(items.count == 4 && items[1] == .text("a") && items[3] == .text("b"))
    }

    @Test("equal dictionaries give equal bytes in different processes", .blockingWork)
    func sameBytesInEveryProcess() throws {
        let here = try CBOREncoder().encode(sampleDictionary()).map { String(format: "%02x", $0) }.joined()
        let runs = try (0..<2).map { _ in try helper(["cbor-dictionary", "/tmp", "group.com.example.unused"]).stdout }
        #expect(runs == [here + "\n", here + "\n"])
    }

    func sampleDictionary() -> [String: [Int: String]] {
        Dictionary(uniqueKeysWithValues: (0..<100).map { i in ("key-\(i * 7919 % 1000)", [i: "v\(i)", -i - 1: "w"]) })
    }
}
