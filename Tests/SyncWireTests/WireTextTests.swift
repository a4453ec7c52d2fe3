import SyncWire
import Testing

/// A text of the gateway's messages is read straight from the message and checked once (issue 51:
/// `String(validating:as:)` instantiated its generic types at each call, 3,100 instructions a pushed
/// change). It must accept exactly the UTF-8 the standard library accepts, which this compares.
@Suite struct WireTextTests {
    /// A message of one text field: its length, then `bytes`.
    static func message(_ bytes: [UInt8]) -> [UInt8] {
        var writer = WireWriter()
        writer.data(bytes)
        return writer.bytes
    }

    @Test func textsAreReadAsTheStandardLibraryValidatesThem() throws {
        let named: [[UInt8]] = [
            [], Array("collection".utf8), Array("日本語のメモ".utf8), Array("😀é".utf8),
            [0x80], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80], [0xE6, 0x97], [0xFF],
            Array("abcdefgh".utf8) + [0xC3], Array("abcdefghijklmnop".utf8) + [0xE2, 0x82, 0xAC],
        ]
        var generator = SystemRandomNumberGenerator()
        let pieces: [[UInt8]] = [Array("a".utf8), Array("é".utf8), Array("日".utf8), Array("😀".utf8), [0x80], [0xC3], [0xF0, 0x9F], [0xFF], [0xED, 0xBF, 0xBF]]
        let random = (0..<3_000).map { _ in
            (0..<Int.random(in: 0...24, using: &generator)).flatMap { _ in pieces.randomElement(using: &generator)! }
        }
        var valid = 0
        for bytes in named + random {
            var reader = WireReader(Self.message(bytes))
            let expected = String(validating: bytes, as: UTF8.self)
            if let expected {
                #expect(try reader.text(max: 1_000) == expected)
                #expect(reader.isAtEnd)
                valid += 1
            } else {
                #expect(throws: GatewayWireError.self) { try reader.text(max: 1_000) }
            }
        }
        // Both kinds were tried: the four valid named texts at least, and the invalid ones.
        #expect(valid >= 4 && valid < named.count + random.count)
    }

    @Test func aTextOverItsLimitOrCutShortIsRefusedByName() throws {
        var over = WireReader(Self.message(Array("abcdef".utf8)))
        #expect { try over.text(max: 5) } throws: { "\($0)".contains("over its 5-byte limit") }
        var short = WireReader(Array(Self.message(Array("abcdef".utf8)).dropLast()))
        #expect { try short.text(max: 100) } throws: { "\($0)".contains("cut short") }
        var bad = WireReader(Self.message([0x61, 0xFF]))
        #expect { try bad.text(max: 100) } throws: { "\($0)".contains("a text is not UTF-8") }
    }
}
