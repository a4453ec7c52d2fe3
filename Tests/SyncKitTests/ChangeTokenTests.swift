import KVStore
import SyncKit
import Testing

@Suite struct ChangeTokenTests {
    @Test func tokensOrderAndEncodeAsPlainIntegers() throws {
        #expect(ChangeToken.zero < ChangeToken(rawValue: 1))
        #expect(try CBOREncoder().encode(ChangeToken(rawValue: 500)) == [0x19, 0x01, 0xF4])
        #expect(try CBORDecoder().decode(ChangeToken.self, from: [0x19, 0x01, 0xF4]) == ChangeToken(rawValue: 500))
    }
}
