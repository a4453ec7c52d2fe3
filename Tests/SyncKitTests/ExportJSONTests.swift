import Foundation
import KVStore
import SyncKit
import Testing

@Suite struct ExportJSONTests {
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
}
