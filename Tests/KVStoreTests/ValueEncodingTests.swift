import Foundation
@testable import KVStore
import Testing

/// The catalog's value encodings, parsed once: each library codec's name parses to its case and prints
/// back the same, anything else is `other` (and the catalog's check says why it is refused), and the
/// catalog's CBOR keeps the text it always had.
@Suite struct ValueEncodingTests {
    @Test(arguments: [("cbor", ValueEncoding.cbor), ("bytes", .bytes), ("fixed(1)", .fixed(size: 1)),
                      ("fixed(56)", .fixed(size: 56)), ("fixed(1048577)", .fixed(size: 1_048_577))])
    func theLibrarysNamesParseAndPrintBack(text: String, expected: ValueEncoding) {
        #expect(ValueEncoding(text) == expected)
        #expect(expected.description == text)
    }

    @Test(arguments: ["fixed(0)", "fixed(-1)", "fixed(+5)", "fixed(05)", "fixed()", "fixed(5", "fixed(99999999999999999999)",
                      "fixed( 5)", "CBOR", "cbor ", "", "json", "fixed(0x10)"])
    func anythingElseIsOther(text: String) {
        #expect(ValueEncoding(text) == .other(text))
        #expect(ValueEncoding(text).description == text)
        #expect(ValueEncoding(text).fixedSize == nil)
    }

    @Test func eachCodecNamesItsCase() {
        #expect(ValueEncoding(CBORCodec<String>().encodingName) == .cbor)
        #expect(ValueEncoding(RawBytesCodec().encodingName) == .bytes)
        #expect(ValueEncoding(FixedLayoutCodec<Int64>().encodingName) == .fixed(size: 8))
    }

    /// What the catalog's check says of each: the library's own pass, a malformed `fixed(…)` and a
    /// non-token are refused by name, and another codec's token passes.
    @Test(arguments: [("cbor", nil), ("fixed(24)", nil), ("myCodec.v2", nil),
                      ("fixed(0)", "is not fixed(N) with N ≥ 1"), ("fixed(2000000)", "over the 1048576-byte limit"),
                      ("two words", "is not an encoding name"), ("", "is not an encoding name")])
    func theCatalogsCheck(text: String, problem: String?) {
        let entry = CatalogEntry(name: "notes", kind: .collection, keyEncoding: "string", valueEncoding: ValueEncoding(text),
                                 schemaVersion: 1, indexes: [], derived: [], derivedFrom: nil, database: "c/notes")
        if let problem {
            #expect(entry.problem?.contains(problem) == true, "\(entry.problem ?? "nil")")
        } else {
            #expect(entry.problem == nil, "\(entry.problem ?? "")")
        }
    }

    /// Stored as text: an entry's CBOR holds `"valueEncoding": "fixed(56)"`, and decodes back.
    @Test func theCatalogStoresTheText() throws {
        let entry = CatalogEntry(name: "days", kind: .collection, keyEncoding: "day", valueEncoding: .fixed(size: 56),
                                 schemaVersion: 1, indexes: [], derived: [], derivedFrom: nil, database: "c/days")
        let bytes = try CBOREncoder().encode(entry)
        let text = Array("fixed(56)".utf8)
        #expect(bytes.firstRange(of: [0x60 | UInt8(text.count)] + text) != nil)
        #expect(try CBORDecoder().decode(CatalogEntry.self, from: bytes) == entry)
    }
}
