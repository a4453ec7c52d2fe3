import Foundation
import Codecs
import Testing

@Suite struct JSONWriterTests {
    @Test func keysKeepTheirOrderAndShortScalarObjectsStayOnOneLine() throws {
        let value: JSONValue = [
            "schemaVersion": "1.0",
            "zebra": 1,
            "settings": ["timezone": "Asia/Tokyo", "historyRange": ["pastMonths": 6, "futureMonths": 12]],
            "list": [["b": true, "a": nil]],
            "empty": [],
            "nothing": [:],
        ]
        #expect(try JSONWriter().render(value) == """
            {
              "schemaVersion": "1.0",
              "zebra": 1,
              "settings": {
                "timezone": "Asia/Tokyo",
                "historyRange": {"pastMonths": 6, "futureMonths": 12}
              },
              "list": [
                {"b": true, "a": null}
              ],
              "empty": [],
              "nothing": {}
            }

            """)
    }

    @Test func aContainerLongerThanTheLineWidthIsBrokenUp() throws {
        let value: JSONValue = ["items": ["key": .string(String(repeating: "x", count: 60)), "n": 1]]
        #expect(try JSONWriter().render(value) == """
            {
              "items": {
                "key": "\(String(repeating: "x", count: 60))",
                "n": 1
              }
            }

            """)
        // The same with a wider line fits.
        #expect(try JSONWriter(lineWidth: 120).render(value).split(separator: "\n").count == 3)
        // lineWidth 0 never puts a container on one line.
        #expect(try JSONWriter(lineWidth: 0).render(["a": ["b": 1]]) == "{\n  \"a\": {\n    \"b\": 1\n  }\n}\n")
    }

    @Test func compactLayoutHasNoWhitespace() throws {
        let value: JSONValue = ["b": [1, 2, ["c": "d e"]], "a": nil]
        #expect(try JSONWriter(layout: .compact, trailingNewline: false).render(value) == #"{"b":[1,2,{"c":"d e"}],"a":null}"#)
    }

    @Test func decimalsAreWrittenExactly() throws {
        let cases: [(String, String)] = [
            ("1200", "1200"), ("1200.00", "1200"), ("12.50", "12.5"), ("12.99", "12.99"), ("0", "0"), ("-0", "0"),
            ("0.000001", "0.000001"), ("-980.5", "-980.5"), ("1000000", "1000000"),
            ("123456789012345678901234567890.123", "123456789012345678901234567890.123"),
            ("1e30", "1000000000000000000000000000000"),
        ]
        for (input, expected) in cases {
            let decimal = try #require(Decimal(string: input))
            #expect(try DecimalText.exact(decimal) == expected, "\(input)")
            #expect(try JSONWriter(layout: .compact, trailingNewline: false).render(.number(decimal)) == expected)
            #expect(Decimal(string: try DecimalText.exact(decimal)) == decimal, "round trip of \(input)")
        }
        #expect(try JSONWriter(trailingNewline: false).render(1200) == "1200")
    }

    @Test func stringsAreEscapedAsJSONTextDoes() throws {
        let text = "quote \" backslash \\ newline \n cr \r tab \t nul \u{0} del \u{7F} 音楽 👨‍👩‍👧"
        #expect(try JSONWriter(trailingNewline: false).render(.string(text)) == JSONText.quoted(text))
        let parsed = try JSONSerialization.jsonObject(with: Data(try JSONWriter().render(["s": .string(text)]).utf8))
        #expect((parsed as? [String: Any])?["s"] as? String == text)
    }

    @Test func nanAndDuplicateKeysAreClearErrorsNamingThePath() {
        let nan: JSONValue = ["billingEvents": [["id": "x"], ["id": "y", "amount": .number(.nan)]]]
        #expect(throws: ExportError.notANumber(path: "$.billingEvents[1].amount")) { try JSONWriter().render(nan) }
        #expect(ExportError.notANumber(path: "$.billingEvents[1].amount").description
                == "the number at $.billingEvents[1].amount is NaN, which an export cannot represent")
        let duplicate: JSONValue = ["settings": ["a": 1, "a": 2]]
        #expect(throws: ExportError.duplicateKey("a", path: "$.settings")) { try JSONWriter().render(duplicate) }
        #expect(throws: ExportError.duplicateKey("a", path: "$.settings")) {
            try JSONWriter(layout: .compact).render(duplicate)
        }
        #expect(ExportError.duplicateKey("a", path: "$.settings").description == "the object at $.settings has the key \"a\" twice")
        #expect(throws: ExportError.notANumber(path: "$[\"odd key\"]")) { try JSONWriter().render(["odd key": .number(.nan)]) }
    }

    @Test func theOutputParsesBackToTheSameValues() throws {
        let value: JSONValue = ["a": [1, "two", true, nil, ["x": .number(Decimal(string: "-0.5")!)]]]
        for writer in [JSONWriter(), JSONWriter(layout: .compact), JSONWriter(indent: 4, lineWidth: 0)] {
            let parsed = try JSONSerialization.jsonObject(with: try writer.data(value)) as? [String: Any]
            let array = try #require(parsed?["a"] as? [Any])
            #expect(array.count == 5)
            #expect(array[0] as? Int == 1)
            #expect(array[1] as? String == "two")
            #expect(array[2] as? Bool == true)
            #expect(array[3] is NSNull)
            #expect((array[4] as? [String: Any])?["x"] as? Double == -0.5)
        }
    }

    @Test func floatsAreTheShortestTextThatReadsBack() throws {
        let cases: [(Double, String)] = [(3, "3.0"), (-0.0, "-0.0"), (1.5, "1.5"), (0.1, "0.1"), (-2.5e-8, "-2.5e-08"),
                                         (1e15, "1000000000000000.0"), (1e16, "1e+16"), (999_999_999_999_999, "999999999999999.0"),
                                         (Double.leastNonzeroMagnitude, "5e-324")]
        for (value, expected) in cases {
            let text = try JSONWriter.compact.render(.float(value))
            #expect(text == expected, "\(value)")
            #expect(Double(text) == value, "\(value) reads back")
        }
        for bad in [Double.nan, .infinity, -.infinity] {
            #expect(throws: ExportError.notANumber(path: "$.samples[2]")) {
                try JSONWriter.compact.render(["samples": [.float(1), .float(2), .float(bad)]])
            }
        }
    }

    /// `kvtool`'s `--json` output used to go through `JSONSerialization` with `.sortedKeys`; the sorting
    /// writer must give the same bytes for the same object: ASCII keys, case ignored first, then lower
    /// case first. (Foundation also compares runs of digits as numbers and letters by the locale; no
    /// key kvtool writes has either.)
    @Test func sortedKeysMatchFoundationsSortedKeys() throws {
        let value: JSONValue = [
            "pageSize": 4096, "pages": 12, "Zed": "z", "alpha": [["b": true, "B": false, "a": nil]], "mapSize": 1_073_741_824,
            "path": "/tmp/a b", "nested": ["z": [], "y": [:], "x": -7],
        ]
        let foundation: [String: Any] = [
            "pageSize": 4096, "pages": 12, "Zed": "z", "alpha": [["b": true, "B": false, "a": NSNull()]], "mapSize": 1 << 30,
            "path": "/tmp/a b", "nested": ["z": [Any](), "y": [String: Any](), "x": -7],
        ]
        let expected = try JSONSerialization.data(withJSONObject: foundation, options: [.sortedKeys, .withoutEscapingSlashes])
        let writer = JSONWriter(layout: .compact, trailingNewline: false, sortsKeys: true)
        #expect(try writer.render(value) == String(decoding: expected, as: UTF8.self))
    }

    @Test func repeatedKeysAreWrittenWhenTheWriterAllowsThem() throws {
        let value: JSONValue = .object([.init("1", 1), .init("1", "one")])
        #expect(throws: ExportError.duplicateKey("1", path: "$")) { try JSONWriter.compact.render(value) }
        #expect(try JSONWriter.cborCompact.render(value) == #"{"1":1,"1":"one"}"#)
        // More members than the small-object scan covers.
        let many = JSONValue.object((0..<20).map { .init("k\($0 % 19)", .integer($0)) })
        #expect(throws: ExportError.duplicateKey("k0", path: "$[0]")) { try JSONWriter.compact.render([many]) }
    }

    @Test func membersAreReadSetAndRemovedByKey() {
        var value: JSONValue = ["a": 1, "b": 2]
        value["b"] = "two"
        value["c"] = nil
        value["d"] = [true]
        #expect(value == ["a": 1, "b": "two", "d": [true]])
        value["a"] = nil
        #expect(value == ["b": "two", "d": [true]])
        #expect(value["d"] == [true])
        #expect(value["a"] == nil)
        var scalar: JSONValue = 1
        scalar["a"] = 2
        #expect(scalar == 1)
        #expect(JSONValue.integer(UInt64.max) == .number(Decimal(UInt64.max)))
        #expect(JSONValue.integer(Int64.min) == .number(Decimal(Int64.min)))
    }

    /// The layout `kvtool serve` shows values in: every non-empty container on lines of its own.
    @Test func aLineWidthOfZeroPutsEveryMemberOnItsOwnLine() throws {
        let writer = JSONWriter(layout: .pretty, indent: 2, lineWidth: 0, trailingNewline: false)
        #expect(try writer.render(["a": [1, ["b": nil]], "c": [], "d": [:], "e": "x"]) == """
            {
              "a": [
                1,
                {
                  "b": null
                }
              ],
              "c": [],
              "d": {},
              "e": "x"
            }
            """)
    }

    /// RFC 8949 §6.1, value by value, without a process (`CBORJSONTests` reads the same through `kvtool get`).
    @Test func cborConvertsAsRFC8949Says() throws {
        let date = Date(timeIntervalSince1970: 1_700_000_000.25)
        let cases: [(CBORValue, String)] = [
            (.unsigned(.max), "18446744073709551615"),
            (.negative(.max), "-18446744073709551616"),
            (.negative(0), "-1"),
            (.float(3), "3.0"),
            (.float(-1e300), "-1e+300"),
            (.float(.nan), "null"),
            (.bytes([]), #""""#),
            (.tagged(CBORTag.positiveBignum, .bytes([1, 0, 0, 0, 0, 0, 0, 0, 0])), #""AQAAAAAAAAAA""#),
            (.tagged(CBORTag.negativeBignum, .bytes([1, 0, 0, 0, 0, 0, 0, 0, 0])), #""~AQAAAAAAAAAA""#),
            (.tagged(22, .array([.bytes([0xFB]), .tagged(23, .bytes([0xAB]))])), #"["+w==","AB"]"#),
            (.tagged(99, .bytes([0xFF])), #""_w""#),
            (.map([CBORMapEntry(key: .unsigned(1), value: .text("n")), CBORMapEntry(key: .text("1"), value: .text("t")),
                   CBORMapEntry(key: .array([.unsigned(1), .bytes([0xFF])]), value: .null)]),
             #"{"1":"n","1":"t","[1,\"_w\"]":null}"#),
            (.tagged(CBORTag.decimalFraction, .array([.negative(0), .unsigned(1250)])), "125"),
            (.tagged(CBORTag.decimalFraction, .array([.negative(1), .unsigned(1250)])), "12.5"),
            (.tagged(CBORTag.uuid, .bytes(Array(repeating: 0xAB, count: 16))), #""ABABABAB-ABAB-ABAB-ABAB-ABABABABABAB""#),
            // A date tag around something that is not a date: its content.
            (.tagged(CBORTag.epochDate, .text("soon")), #""soon""#),
            // Dates in the proleptic Gregorian calendar, years 0000 to 9999 (issue 50: Foundation's format
            // gave 0001-01-03 here, and year 506713 or -4712 outside its range and for NaN), floored to
            // the millisecond; outside those years, or NaN, the content.
            (.tagged(CBORTag.epochDate, .negative(62_135_596_799)), #""0001-01-01T00:00:00.000""#),
            (.tagged(CBORTag.epochDate, .negative(62_167_219_199)), #""0000-01-01T00:00:00.000""#),
            (.tagged(CBORTag.epochDate, .negative(62_167_219_200)), "-62167219201"),
            (.tagged(CBORTag.epochDate, .unsigned(253_402_300_800)), "253402300800"),
            (.tagged(CBORTag.epochDate, .float(-0.0001)), #""1969-12-31T23:59:59.999""#),
            (.tagged(CBORTag.epochDate, .float(.nan)), "null"),
            (.tagged(CBORTag.referenceDate, .float(0)), #""2001-01-01T00:00:00.000""#),
        ]
        for (cbor, expected) in cases {
            #expect(JSONValue.jsonText(cbor) == expected, "\(cbor)")
        }
        let encodedDate = try CBOREncoder().encode(date)
        #expect(JSONValue.jsonText(try CBORValue.decode(encodedDate)) == #""2023-11-14T22:13:20.250""#)
    }

    struct Answer: Encodable {
        struct Item: Encodable {
            var name: String
            var size: UInt64
            var isSelf: Bool
            enum CodingKeys: String, CodingKey { case name, size, isSelf = "self" }
        }
        var transaction: Int
        var items: [Item]
        var next: String?
        var amount: Decimal
        var ratio: Double
        var raw: JSONValue
        var tags: Set<String>
    }

    /// Typed answers (`kvtool serve`'s) become JSON values in declaration order, a nil as null, and
    /// give what `JSONEncoder` gives where both write the same thing.
    @Test func encodableValuesBecomeOrderedJSON() throws {
        let answer = Answer(transaction: 7, items: [.init(name: "a\"b", size: .max, isSelf: true)], next: nil,
                            amount: Decimal(string: "12.50")!, ratio: 0.25, raw: ["z": 1, "a": [nil]], tags: ["only"])
        let value = try JSONValue(encoding: answer)
        #expect(try JSONWriter.compact.render(value)
                == #"{"transaction":7,"items":[{"name":"a\"b","size":18446744073709551615,"self":true}],"next":null,"amount":12.5,"ratio":0.25,"raw":{"z":1,"a":[null]},"tags":["only"]}"#)
        struct Plain: Encodable { var b: [Int]; var a: String; var c: Bool }
        let plain = Plain(b: [1, -2], a: "x/y", c: false)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let sorted = JSONWriter(layout: .compact, trailingNewline: false, sortsKeys: true)
        #expect(try sorted.render(JSONValue(encoding: plain)) == String(decoding: try encoder.encode(plain), as: UTF8.self))
        // A value that encodes nothing is an empty object; JSONValue through JSONEncoder keeps its shape.
        struct Nothing: Encodable { func encode(to encoder: any Encoder) throws {} }
        #expect(try JSONValue(encoding: Nothing()) == [:])
        struct Dated: Encodable { var at: Date; var never: Date? }
        let dated = Dated(at: Date(timeIntervalSince1970: 1_700_000_000.75), never: nil)
        #expect(try JSONWriter.compact.render(JSONValue(encoding: dated)) == #"{"at":"2023-11-14T22:13:20Z","never":null}"#)
        let roundTrip = try JSONSerialization.jsonObject(with: try JSONEncoder().encode(value)) as? [String: Any]
        #expect(roundTrip?["transaction"] as? Int == 7 && roundTrip?["next"] is NSNull)
    }
}
