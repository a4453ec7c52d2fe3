import Foundation
@testable import KVStore
import Testing
import TestSupport

/// How kvtool shows stored CBOR as JSON, as RFC 8949 §6.1 converts: byte strings as base64url
/// without padding (base64 or base16 where tags 22 and 23 ask), bignums as the base64url of their
/// magnitude with `~` before a negative one, and non-finite floats and simple values as null. Each
/// value is stored raw by this test and read back through `kvtool get`, a process of its own.
@Suite struct CBORJSONTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.cborjson"

    @Test(.blockingWork) func storedCBORBecomesJSONAsRFC8949Says() throws {
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        _ = try container.store.collection("values", key: String.self, value: Int.self)
        let (_, raw) = try container.store.untypedCollection(named: "values")
        let twoTo64: [UInt8] = [1, 0, 0, 0, 0, 0, 0, 0, 0]
        let cases: [(String, CBORValue, String)] = [
            ("plus-2^64", .tagged(CBORTag.positiveBignum, .bytes(twoTo64)), #""AQAAAAAAAAAA""#),
            ("minus-2^64-1", .tagged(CBORTag.negativeBignum, .bytes(twoTo64)), #""~AQAAAAAAAAAA""#),
            ("bytes", .bytes([0xFB, 0xFF]), #""-_8""#),
            ("tag21", .tagged(21, .bytes([0xFB, 0xFF])), #""-_8""#),
            ("tag22", .tagged(22, .bytes([0xFB, 0xFF])), #""+/8=""#),
            ("tag23", .tagged(23, .array([.bytes([0x01, 0xAB]), .map([CBORMapEntry(key: .text("b"), value: .bytes([0xFF]))])])),
             #"["01AB",{"b":"FF"}]"#),
            ("simple", .array([.simple(16), .undefined, .null, .bool(true), .float(.nan), .float(-.infinity), .float(1.5)]),
             "[null,null,null,true,null,null,1.5]"),
        ]
        try container.store.write { tx in
            for (key, value, _) in cases { try raw.put(value.encoded(), forKey: ByteKey(Array(key.utf8)), in: tx) }
        }
        for (key, _, expected) in cases {
            let result = try run(productsDirectory() + "/kvtool", ["get", "values", key, "--root", dir.path, "--group", group])
            #expect(result.status == 0, "\(key): \(result.stderr)")
            #expect(result.stdout == expected + "\n", "\(key)")
        }
    }

    @Test(.blockingWork, arguments: [([UInt8](), "", ""), ([0], "AA", "AA=="), ([0xFB], "-w", "+w=="), ([0xFB, 0xFF], "-_8", "+/8="),
                      ([0xFB, 0xFF, 0xBF], "-_-_", "+/+/"), (Array("hello world".utf8), "aGVsbG8gd29ybGQ", "aGVsbG8gd29ybGQ=")])
    func base64BothWays(bytes: [UInt8], url: String, standard: String) {
        #expect(Base64.url(bytes) == url)
        #expect(Base64.standard(bytes) == standard)
        #expect(Base64.standard(bytes) == Data(bytes).base64EncodedString())
        #expect(Base64.decodeURL(url) == bytes)
    }

    @Test(.blockingWork) func base64urlRefusesWhatIsNotBase64url() {
        for text in ["a", "ab=c", "+/", "AA==", "A A", "é"] { #expect(Base64.decodeURL(text) == nil, "\(text)") }
    }
}
