import Foundation
import KVStore
@testable import SyncKit
import Testing
import TestSupport

/// History's direct encoder and decoder against `Codable`: the encoder writes Codable's bytes, and on
/// every input the direct decoder takes, both give the same entry; on the others `Codable` decides.
/// Valid entries of every shape, then the same bytes cut, flipped and spliced, from fixed seeds.
@Suite struct HistoryEntryCodecTests {
    /// xorshift64*, seeded: the same cases every run.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state ^= state >> 12; state ^= state << 25; state ^= state >> 27
            return state &* 0x2545_F491_4F6C_DD1D
        }
    }

    static func randomEntry(_ rng: inout Generator) -> HistoryEntry {
        let texts = ["", "app", "widget", "チェックリスト", "a\u{0}b", "notes.2026", String(repeating: "x", count: 300)]
        let dates = [Date(), Date(timeIntervalSince1970: 0), Date(timeIntervalSinceReferenceDate: 0.1),
                     Date(timeIntervalSince1970: Double(rng.next() % 4_000_000_000) + Double(rng.next() % 1000) / 997),
                     Date.distantFuture, Date.distantPast]
        let integers: [UInt64] = [0, 1, 23, 24, 255, 256, 65_535, 65_536, UInt64(UInt32.max), UInt64(UInt32.max) + 1,
                                  UInt64(Int.max), UInt64.max, rng.next()]
        let key = (0..<Int(rng.next() % 40)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
        var entry = HistoryEntry(
            token: ChangeToken(rawValue: integers.randomElement(using: &rng)!),
            transactionID: Int(integers.randomElement(using: &rng)! & UInt64(Int.max)),
            author: Bool.random(using: &rng) ? nil : texts.randomElement(using: &rng)!,
            timestamp: dates.randomElement(using: &rng)!,
            target: Bool.random(using: &rng) ? .collection(texts.randomElement(using: &rng)!) : .defaults(texts.randomElement(using: &rng)!),
            key: key, operation: Bool.random(using: &rng) ? .put : .delete,
            clock: Bool.random(using: &rng) ? nil : HybridTimestamp(rawValue: integers.randomElement(using: &rng)!))
        if rng.next() % 8 == 0 { entry.kind = texts.randomElement(using: &rng)! }
        return entry
    }

    /// Equal, with the timestamp compared bit for bit (a NaN is a NaN).
    static func same(_ a: HistoryEntry, _ b: HistoryEntry) -> Bool {
        var a = a, b = b
        let bits = (a.timestamp.timeIntervalSinceReferenceDate.bitPattern, b.timestamp.timeIntervalSinceReferenceDate.bitPattern)
        (a.timestamp, b.timestamp) = (.distantPast, .distantPast)
        return a == b && bits.0 == bits.1
    }

    /// What `Codable` makes of `bytes`, or nil where it throws.
    static func viaCodable(_ bytes: [UInt8]) -> HistoryEntry? {
        try? CBORDecoder().decode(HistoryEntry.self, from: bytes)
    }

    static func direct(_ bytes: [UInt8]) -> HistoryEntry? {
        bytes.withUnsafeBytes { HistoryEntry.decodedDirectly(from: $0) }
    }

    @Test func everyEntryThisLibraryWritesIsReadDirectlyAsCodableReadsIt() throws {
        var rng = Generator(state: 0x5EED_0001)
        for _ in 0..<20_000 {
            let entry = Self.randomEntry(&rng)
            let bytes = try CBOREncoder().encode(entry)
            // Written directly, byte for byte what Codable writes.
            #expect(entry.encodedDirectly() == bytes, "\(entry)")
            let direct = try #require(Self.direct(bytes), "the direct decoder refused \(Hex.encode(bytes))")
            let codable = try #require(Self.viaCodable(bytes))
            #expect(Self.same(direct, codable), "\(Hex.encode(bytes))")
            #expect(Self.same(direct, entry))
            // The codec the history collection uses gives the same.
            let viaCodec = try bytes.withUnsafeBytes { try HistoryEntry.codec.decode($0) }
            #expect(Self.same(viaCodec, entry))
        }
    }

    @Test func onDamagedBytesTheDirectDecoderAgreesWithCodableOrStandsAside() throws {
        var rng = Generator(state: 0x5EED_0002)
        var tookDirectly = 0, stoodAside = 0, codableRefused = 0
        for round in 0..<60_000 {
            var bytes = try CBOREncoder().encode(Self.randomEntry(&rng))
            switch round % 6 {
            case 0:   // cut short
                bytes.removeLast(Int(rng.next() % UInt64(bytes.count)) + 1)
            case 1:   // one byte changed
                bytes[Int(rng.next() % UInt64(bytes.count))] = UInt8(truncatingIfNeeded: rng.next())
            case 2:   // a few bytes changed
                for _ in 0..<3 { bytes[Int(rng.next() % UInt64(bytes.count))] ^= UInt8(truncatingIfNeeded: rng.next() | 1) }
            case 3:   // trailing bytes
                bytes += (0..<Int(rng.next() % 4) + 1).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            case 4:   // a head byte changed to another major type or width
                let at = Int(rng.next() % UInt64(bytes.count))
                bytes[at] = (bytes[at] & 0x1F) | UInt8(truncatingIfNeeded: (rng.next() % 8) << 5)
            default:  // spliced with another entry's bytes
                let other = try CBOREncoder().encode(Self.randomEntry(&rng))
                let cut = Int(rng.next() % UInt64(bytes.count))
                bytes = Array(bytes[..<cut]) + other[Int(rng.next() % UInt64(other.count))...]
            }
            let codable = Self.viaCodable(bytes)
            if codable == nil { codableRefused += 1 }
            guard let direct = Self.direct(bytes) else {
                stoodAside += 1
                continue
            }
            tookDirectly += 1
            let agreed = try #require(codable, "the direct decoder took bytes Codable refuses: \(Hex.encode(bytes))")
            #expect(Self.same(direct, agreed), "\(Hex.encode(bytes))")
        }
        print("damaged entries: \(tookDirectly) read directly (Codable agreed on each), \(stoodAside) left to Codable, which refused \(codableRefused)")
        // Both branches were exercised, or the comparison proves nothing.
        #expect(tookDirectly > 1_000 && stoodAside > 1_000)
    }

    @Test func aMapWithKeysCodableIgnoresOrAnotherFormIsLeftToCodable() throws {
        let entry = HistoryEntry(token: ChangeToken(rawValue: 7), transactionID: 3, author: "app", timestamp: Date(timeIntervalSince1970: 5),
                                 target: .collection("notes"), key: [1, 2, 3], operation: .put, clock: HybridTimestamp(rawValue: 9))
        // An unknown key (a newer build's field): Codable ignores it, the direct decoder stands aside.
        guard case .map(var fields) = try CBORValue.decode(CBOREncoder().encode(entry)) else { Issue.record("not a map"); return }
        fields.append(CBORMapEntry(key: .text("newField"), value: .unsigned(1)))
        let withUnknown = CBORValue.map(fields).encoded()
        #expect(Self.direct(withUnknown) == nil)
        let decoded = try withUnknown.withUnsafeBytes { try HistoryEntry.codec.decode($0) }
        #expect(decoded == entry)
        // The token written as a float that is an integer: Codable takes it, the direct decoder does not.
        guard case .map(var floatFields) = try CBORValue.decode(CBOREncoder().encode(entry)) else { return }
        floatFields = floatFields.map { $0.key == .text("token") ? CBORMapEntry(key: $0.key, value: .float(7)) : $0 }
        let floatToken = CBORValue.map(floatFields).encoded()
        #expect(Self.direct(floatToken) == nil)
        #expect(try floatToken.withUnsafeBytes { try HistoryEntry.codec.decode($0) } == entry)
    }
}
