import Foundation
import Testing
import TestSupport
import KVStore
import SyncKit
import Workloads

/// The widget's hand-written reader of its feed payload (`ChecklistWidgetFeed.decodeEncodedCBOR`),
/// against `CBOREncoder` and `CBORDecoder`: it reads what the encoder writes, to the same value as
/// `CBORDecoder`; whatever it accepts, `CBORDecoder` accepts with the same value; malformed, truncated,
/// random and oversized bytes give `nil` (the widget then falls back to `CBORDecoder`), never a trap.
@Suite struct ChecklistWidgetFeedCBORTests {
    static let day = LogicalDay(year: 2026, month: 11, day: 21)!

    /// Payloads covering each field's forms: optionals present and absent, empty and full maps,
    /// integers of both signs and at their limits, doubles of every kind the encoder writes as
    /// float64, text with non-ASCII characters, days far from today.
    static var payloads: [ChecklistWidgetFeed] {
        let message = ChecklistWidgetFeed.LatestMessage(day: day - 3, category: .engage, text: "A: slept well ✓ — 睡眠")
        return [
            ChecklistWidgetFeed(day: day, totalAverage: 3.37, categoryAverages: ["perceive": 4.3, "think": 3.25, "execute": 2.0, "engage": 3.5, "sustain": 1e-300],
                                streak: Streak(current: 2, longest: 16), latestMessage: message, sourceTransactionID: 101),
            ChecklistWidgetFeed(day: day, totalAverage: nil, categoryAverages: [:], streak: Streak(current: 0, longest: 0),
                                latestMessage: nil, sourceTransactionID: 0),
            ChecklistWidgetFeed(day: LogicalDay(dayNumber: .min), totalAverage: -0.0, categoryAverages: ["x": .infinity, "": -.infinity, "é": .greatestFiniteMagnitude],
                                streak: Streak(current: .max, longest: .min), latestMessage: ChecklistWidgetFeed.LatestMessage(day: LogicalDay(dayNumber: .max), category: .sustain, text: ""),
                                sourceTransactionID: .min),
            ChecklistWidgetFeed(day: LogicalDay(year: 1, month: 1, day: 1)!, totalAverage: .leastNonzeroMagnitude, categoryAverages: ["think": 3],
                                streak: Streak(current: -1, longest: 1 << 40), latestMessage: message, sourceTransactionID: .max),
        ]
    }

    /// The same payload, doubles compared by their bits: a mutated float is often a NaN, which `==`
    /// never equals.
    static func same(_ a: ChecklistWidgetFeed?, _ b: ChecklistWidgetFeed?) -> Bool {
        guard let a, let b else { return a == nil && b == nil }
        return a.day == b.day && a.totalAverage?.bitPattern == b.totalAverage?.bitPattern
            && a.categoryAverages.mapValues(\.bitPattern) == b.categoryAverages.mapValues(\.bitPattern)
            && a.streak == b.streak && a.latestMessage == b.latestMessage && a.sourceTransactionID == b.sourceTransactionID
    }

    @Test func readsWhatTheEncoderWritesAsCBORDecoderDoes() throws {
        for payload in Self.payloads {
            let bytes = try CBOREncoder().encode(payload)
            let byHand = try #require(ChecklistWidgetFeed.decodeEncodedCBOR(bytes))
            #expect(byHand == payload)
            #expect(byHand == (try CBORDecoder().decode(ChecklistWidgetFeed.self, from: bytes)))
        }
    }

    /// Every single-byte change, every truncation and a few thousand random edits of each encoded
    /// payload: the hand-written reader never traps, and whatever it accepts `CBORDecoder` accepts
    /// with the same value. Truncations are all refused.
    @Test func acceptsNothingCBORDecoderRejectsOrReadsDifferently() throws {
        var random = SplitMix64(seed: 39)
        var accepted = 0, refused = 0
        func check(_ bytes: [UInt8]) {
            guard let byHand = ChecklistWidgetFeed.decodeEncodedCBOR(bytes) else { refused += 1; return }
            accepted += 1
            let decoded = try? CBORDecoder().decode(ChecklistWidgetFeed.self, from: bytes)
            #expect(Self.same(decoded, byHand), "accepted bytes \(bytes) as \(byHand), which CBORDecoder reads as \(String(describing: decoded))")
        }
        for payload in Self.payloads {
            let bytes = try CBOREncoder().encode(payload)
            for count in 0 ..< bytes.count {
                #expect(ChecklistWidgetFeed.decodeEncodedCBOR(Array(bytes.prefix(count))) == nil, "a truncation to \(count) bytes was accepted")
            }
            for position in bytes.indices {
                for replacement: UInt8 in [0x00, 0x01, 0x17, 0x18, 0x1f, 0x20, 0x3f, 0x40, 0x5f, 0x60, 0x7f, 0x80, 0x9f, 0xa0, 0xbf, 0xc0, 0xc2, 0xd8, 0xe0, 0xf4, 0xf6, 0xf7, 0xf9, 0xfa, 0xfb, 0xff, bytes[position] ^ 0x01, bytes[position] ^ 0x20] {
                    var mutated = bytes
                    mutated[position] = replacement
                    check(mutated)
                }
            }
            for _ in 0 ..< 2_000 {
                var mutated = bytes
                for _ in 0 ... Int(random.next() % 3) {
                    let position = Int(random.next() % UInt64(mutated.count))
                    switch random.next() % 3 {
                    case 0: mutated[position] = UInt8(truncatingIfNeeded: random.next())
                    case 1: mutated.insert(UInt8(truncatingIfNeeded: random.next()), at: position)
                    default: if mutated.count > 1 { mutated.remove(at: position) }
                    }
                }
                check(mutated)
            }
        }
        // The mutations both kept and broke payloads: the comparison above was exercised both ways.
        #expect(accepted > 100 && refused > 1_000, "accepted \(accepted), refused \(refused)")
    }

    @Test func garbageOversizedAndHostileBytesGiveNil() throws {
        var random = SplitMix64(seed: 3939)
        for length in [0, 1, 2, 7, 64, 1_000, 100_000] {
            let garbage = (0 ..< length).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let byHand = ChecklistWidgetFeed.decodeEncodedCBOR(garbage)
            if let byHand { #expect(Self.same(byHand, try? CBORDecoder().decode(ChecklistWidgetFeed.self, from: garbage))) }
        }
        // Larger than the decoder's input limit (16 MiB by default): refused before any parsing.
        let valid = try CBOREncoder().encode(Self.payloads[0])
        let oversized = valid + [UInt8](repeating: 0, count: CBORLimits.default.maxInputSize)
        #expect(ChecklistWidgetFeed.decodeEncodedCBOR(oversized) == nil)
        // A huge declared length with no bytes behind it, nesting far past the depth limit, a map
        // whose keys repeat, a top-level item that is not a map, an unknown field, a wrong-typed field.
        #expect(ChecklistWidgetFeed.decodeEncodedCBOR([0xbb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]) == nil)
        #expect(ChecklistWidgetFeed.decodeEncodedCBOR([UInt8](repeating: 0x81, count: 100_000) + [0x00]) == nil)
        #expect(ChecklistWidgetFeed.decodeEncodedCBOR(CBORValue.map([CBORMapEntry(key: .text("day"), value: .text("2026-11-21")),
                                                                       CBORMapEntry(key: .text("day"), value: .text("2026-11-22"))]).encoded()) == nil)
        #expect(ChecklistWidgetFeed.decodeEncodedCBOR(CBORValue.array([]).encoded()) == nil)
        guard case .map(let entries) = try CBORValue.decode(valid) else { Issue.record("the payload is not a map"); return }
        #expect(ChecklistWidgetFeed.decodeEncodedCBOR(CBORValue.map(entries + [CBORMapEntry(key: .text("extra"), value: .null)]).encoded()) == nil)
        let wrongTyped = entries.map { $0.key == .text("sourceTransactionID") ? CBORMapEntry(key: $0.key, value: .text("101")) : $0 }
        #expect(ChecklistWidgetFeed.decodeEncodedCBOR(CBORValue.map(wrongTyped).encoded()) == nil)
        #expect(throws: (any Error).self) { try CBORDecoder().decode(ChecklistWidgetFeed.self, from: CBORValue.map(wrongTyped).encoded()) }
    }

    /// Through the widget's feed: the same publication reads the same with and without the
    /// hand-written reader, and a payload it refuses still gets `CBORDecoder`'s error.
    @Test func theWidgetsFeedReadsAsAPlainOne() throws {
        let dir = TemporaryDirectory()
        let container = try dir.container("group.com.shibu.checklist")
        let widget = try ChecklistWidgetFlow.Widget(groupIdentifier: GroupIdentifier("group.com.shibu.checklist"), root: container.layout.root)
        #expect(widget.feed.payloadDecoder != nil)
        let plain = try WidgetFeed<ChecklistWidgetFeed>(name: ChecklistWidgetFeed.feedName, container: container)
        for payload in Self.payloads {
            try plain.publish(payload)
            let read = try widget.feed.read()
            #expect(read == (try plain.read()))
            #expect(read.payload == payload)
        }
        // Another type published under the feed's name: the hand-written reader refuses it, and the
        // error is CBORDecoder's, as before.
        try WidgetFeed<Int>(name: ChecklistWidgetFeed.feedName, container: container).publish(5)
        #expect(throws: WidgetFeedError.self) { try widget.feed.read() }
        do {
            _ = try widget.feed.read()
        } catch let error as WidgetFeedError {
            guard case .payloadMismatch = error else { Issue.record("unexpected error \(error)"); return }
        }
    }
}
