#if PostgreSQL
import Foundation
import KVStore
import Workloads

/// Values for `CBORJSONSQLTests` (and `kvtool bench json`'s idea of a value): the workloads' Codable
/// types with random content, and random CBOR of every kind, written byte by byte so that forms
/// `CBOREncoder` never writes (float16 and float32, indefinite lengths, non-shortest heads, repeated
/// and non-text keys, bad UTF-8, nesting past the limit) are there too. Seeded: the same in every run.
enum CBORJSONSamples {
    /// An encoded value, and (for the types without a `Date`) a check that CBOR and JSON of it decode
    /// into the same value it was made from.
    struct Sample {
        var bytes: [UInt8]
        var decodesAlike: (_ cbor: [UInt8], _ json: [UInt8]) throws -> Bool = { _, _ in false }
    }

    static func sample<T: Codable & Equatable>(_ value: T) throws -> Sample {
        Sample(bytes: try CBOREncoder().encode(value)) { cbor, json in
            try CBORDecoder().decode(T.self, from: cbor) == value && JSONDecoder().decode(T.self, from: Data(json)) == value
        }
    }

    // MARK: Workload values

    /// Text of many kinds: ASCII, accents in both normal forms, CJK, emoji, quotes, backslashes and
    /// control characters.
    static let words = ["Netflix", "Spotify Premium", "ジム", "café", "cafe\u{301}", "水道光熱費", "🎵 music", "a\"b", "back\\slash",
                        "tab\tline\nbreak", "bell\u{7}", "del\u{7F}", "", "x", "Ünïcödé", "𐅑", "multi word memo with spaces"]

    static func word(using g: inout SplitMix64) -> String { words[Int.random(in: 0 ..< words.count, using: &g)] }

    static func text(using g: inout SplitMix64, max: Int = 4) -> String {
        (0 ..< Int.random(in: 1 ... max, using: &g)).map { _ in word(using: &g) }.joined(separator: " ")
    }

    static func uuid(using g: inout SplitMix64) -> UUID {
        let a = g.next(), b = g.next()
        return withUnsafeBytes(of: (a, b)) { UUID(uuid: $0.load(as: uuid_t.self)) }
    }

    /// Dates from before 1582 to after 9999, with fractions that land near a millisecond, and whole ones.
    static func date(using g: inout SplitMix64) -> Date {
        switch Int.random(in: 0 ..< 4, using: &g) {
        case 0: Date(timeIntervalSince1970: Double(Int.random(in: -70_000_000_000 ... 260_000_000_000, using: &g)))
        case 1: Date(timeIntervalSince1970: Double.random(in: -1e11 ... 3e11, using: &g))
        case 2: Date(timeIntervalSinceReferenceDate: Double.random(in: 0 ... 1e9, using: &g))
        default: Date(timeIntervalSince1970: Double(Int.random(in: 0 ... 2_000_000_000, using: &g)) + Double(Int.random(in: 0 ... 999, using: &g)) / 1000)
        }
    }

    static func decimal(using g: inout SplitMix64) -> Decimal {
        switch Int.random(in: 0 ..< 4, using: &g) {
        case 0: return Decimal(Int.random(in: 0 ... 100_000, using: &g))
        case 1: return Decimal(sign: Bool.random(using: &g) ? .minus : .plus, exponent: Int.random(in: -6 ... 6, using: &g),
                               significand: Decimal(UInt64.random(in: 0 ... 1_000_000_000_000, using: &g)))
        case 2: return Decimal(string: "\(UInt64.random(in: 0 ... .max, using: &g))\(UInt32.random(in: 0 ... .max, using: &g))")!
        default: return Decimal(string: "-0.\(UInt64.random(in: 1 ... .max, using: &g))")!
        }
    }

    static func optional<T>(_ make: (inout SplitMix64) -> T, using g: inout SplitMix64) -> T? {
        Bool.random(using: &g) ? make(&g) : nil
    }

    /// A finite float of any size, or a whole one (3.0, 1e15, 2^53 and above).
    static func finite(using g: inout SplitMix64) -> Double {
        while true {
            let d: Double = switch Int.random(in: 0 ..< 3, using: &g) {
            case 0: Double(bitPattern: g.next())
            case 1: Double(Int64.random(in: -1 << 60 ... 1 << 60, using: &g)) * [1, 0.5, 1e-3, 1e-7][Int.random(in: 0 ..< 4, using: &g)]
            default: Double.random(in: -1000 ... 1000, using: &g)
            }
            if d.isFinite { return d }
        }
    }

    static func customData(depth: Int, using g: inout SplitMix64) -> CustomDataValue {
        switch Int.random(in: 0 ..< (depth > 2 ? 5 : 7), using: &g) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &g))
        case 2: return .integer(Int64.random(in: .min ... .max, using: &g))
        case 3:
            // Not whole: a whole double decodes as .integer (CustomDataValue tries Int64 first).
            let d = finite(using: &g)
            return d == d.rounded() ? .double(d + 0.5 == d ? 0.25 : d + 0.5) : .double(d)
        case 4: return .string(text(using: &g))
        case 5: return .array((0 ..< Int.random(in: 0 ... 3, using: &g)).map { _ in customData(depth: depth + 1, using: &g) })
        default:
            var object: [String: CustomDataValue] = [:]
            for _ in 0 ..< Int.random(in: 0 ... 3, using: &g) { object[word(using: &g)] = customData(depth: depth + 1, using: &g) }
            return .object(object)
        }
    }

    static func dailyRecord(using g: inout SplitMix64) -> DailyRecord {
        var scores: [String: Int] = [:], memos: [String: String] = [:]
        for category in ChecklistCategory.allCases {
            for item in 0 ..< Int.random(in: 0 ... 4, using: &g) {
                scores["\(category.rawValue).\(item)"] = Int.random(in: 0 ... 5, using: &g)
                if Int.random(in: 0 ..< 4, using: &g) == 0 { memos["\(category.rawValue).\(item)"] = text(using: &g) }
            }
        }
        return DailyRecord(day: LogicalDay(dayNumber: Int32.random(in: -100_000 ... 100_000, using: &g)), scores: scores, memos: memos)
    }

    static func payload(using g: inout SplitMix64) throws -> NotificationPayload {
        var customData: [String: CustomDataValue]?
        if Bool.random(using: &g) {
            customData = [:]
            for _ in 0 ..< Int.random(in: 1 ... 6, using: &g) { customData?[word(using: &g)] = Self.customData(depth: 0, using: &g) }
        }
        return try NotificationPayload(title: "T " + text(using: &g), body: "B " + text(using: &g, max: 20),
                                       imageUrl: Bool.random(using: &g) ? "https://example.com/\(g.next()).png" : nil,
                                       customData: customData, categoryId: optional({ word(using: &$0) }, using: &g),
                                       badge: optional({ Int.random(in: 0 ... 99, using: &$0) }, using: &g),
                                       sound: optional({ _ in "default" }, using: &g))
    }

    static func template(using g: inout SplitMix64) -> OshiTrainerTemplate {
        OshiTrainerTemplate(id: uuid(using: &g), displayName: text(using: &g), personality: text(using: &g, max: 12),
                            imagePath: optional({ "Trainers/\($0.next()).png" }, using: &g))
    }

    static func cycle(using g: inout SplitMix64) -> BillingCycle {
        switch Int.random(in: 0 ..< 3, using: &g) {
        case 0: .monthly(interval: Int.random(in: 1 ... 12, using: &g))
        case 1: .yearly(interval: Int.random(in: 1 ... 5, using: &g))
        default: .customDays(days: Int.random(in: 1 ... 365, using: &g))
        }
    }

    /// `count` encoded values of the workloads' types, in turn.
    static func workloadValues(count: Int, seed: UInt64) throws -> [Sample] {
        var g = SplitMix64(seed: seed)
        var out: [Sample] = []
        out.reserveCapacity(count)
        for i in 0 ..< count {
            switch i % 7 {
            case 0:
                out.append(try sample(Subscription(
                    id: uuid(using: &g), name: text(using: &g), amount: decimal(using: &g), currency: ["JPY", "USD", "EUR"][i % 3],
                    status: [.active, .paused, .cancelled][Int.random(in: 0 ..< 3, using: &g)], category: optional({ word(using: &$0) }, using: &g),
                    firstBillingDate: LogicalDay(dayNumber: Int32.random(in: 0 ... 30000, using: &g)),
                    cancellationDate: optional({ LogicalDay(dayNumber: Int32.random(in: 0 ... 30000, using: &$0)) }, using: &g),
                    billingCycle: cycle(using: &g), memo: optional({ text(using: &$0, max: 30) }, using: &g),
                    createdAt: date(using: &g), updatedAt: date(using: &g))))
            case 1:
                out.append(try sample(BillingEvent(
                    id: uuid(using: &g), subscriptionId: uuid(using: &g), billedAt: LogicalDay(dayNumber: Int32.random(in: 0 ... 30000, using: &g)),
                    amount: decimal(using: &g), currency: "JPY", eventType: Bool.random(using: &g) ? .confirmed : .projected,
                    isAmountOverridden: Bool.random(using: &g), memo: optional({ text(using: &$0) }, using: &g),
                    createdAt: date(using: &g), updatedAt: date(using: &g))))
            case 2:
                out.append(try sample(DeviceTokenRegistrationResponse(
                    id: uuid(using: &g).uuidString.lowercased(), token: Hex.encode((0 ..< 32).map { _ in UInt8.random(in: 0 ... 255, using: &g) }),
                    platform: "iOS", playerAccountId: optional({ "player-\($0.next())" }, using: &g),
                    createdAt: date(using: &g), updatedAt: date(using: &g))))
            case 3: out.append(try sample(payload(using: &g)))
            case 4: out.append(try sample(dailyRecord(using: &g)))
            case 5: out.append(try sample(template(using: &g)))
            default: out.append(try sample([word(using: &g): customData(depth: 0, using: &g)]))
            }
        }
        return out
    }

    /// A value of a type without a `Date`: a daily record, a notification payload or a trainer template.
    static func dateless(_ kind: Int, using g: inout SplitMix64) throws -> Sample {
        switch kind {
        case 0: try sample(dailyRecord(using: &g))
        case 1: try sample(payload(using: &g))
        default: try sample(template(using: &g))
        }
    }

    // MARK: Random CBOR

    /// A head: major type and argument, in the shortest form or (`wide`) one with more bytes than needed.
    static func head(_ major: UInt8, _ n: UInt64, wide: Bool = false) -> [UInt8] {
        let size = n < 24 && !wide ? 0 : n < 256 && !wide ? 1 : n < 65536 && !wide ? 2 : n <= UInt64(UInt32.max) && !wide ? 4 : 8
        if size == 0 { return [major << 5 | UInt8(n)] }
        let info: UInt8 = [1: 24, 2: 25, 4: 26, 8: 27][size]!
        return [major << 5 | info] + (0 ..< size).reversed().map { UInt8(truncatingIfNeeded: n >> (8 * UInt64($0))) }
    }

    static func randomItem(using g: inout SplitMix64) -> [UInt8] {
        var out: [UInt8] = []
        item(depth: 0, into: &out, using: &g)
        return out
    }

    static func string(_ major: UInt8, _ bytes: [UInt8], into out: inout [UInt8], using g: inout SplitMix64) {
        if bytes.count > 1 && Int.random(in: 0 ..< 5, using: &g) == 0 {
            let cut = Int.random(in: 0 ... bytes.count, using: &g)
            out += [major << 5 | 31] + head(major, UInt64(cut)) + bytes[..<cut] + head(major, UInt64(bytes.count - cut)) + bytes[cut...] + [0xFF]
        } else {
            out += head(major, UInt64(bytes.count), wide: Int.random(in: 0 ..< 8, using: &g) == 0) + bytes
        }
    }

    static func textBytes(using g: inout SplitMix64) -> [UInt8] {
        switch Int.random(in: 0 ..< 40, using: &g) {
        case 0: return [0x61, 0x00, 0x62]                                  // U+0000
        case 1: return [0x61, 0xC3]                                        // truncated sequence
        case 2: return [0xED, 0xA0, 0x80]                                  // a surrogate
        case 3: return [0xF4, 0x90, 0x80, 0x80]                            // past U+10FFFF
        case 4: return [0xC0, 0xAF]                                        // overlong
        default: return Array(word(using: &g).utf8)
        }
    }

    /// Interesting floats: whole ones around 10^15 and 2^53, tiny and huge ones, and any bits.
    static func floatBits(using g: inout SplitMix64) -> Double {
        let specials: [Double] = [0, -0.0, 3, -3, 1e15, 1e15 - 1, 9_007_199_254_740_992, 9_007_199_254_740_994, 1e16, 1e-4, 9.9e-5,
                                  0.1, 1.5e300, .leastNonzeroMagnitude, 4_503_599_627_370_497, 123_456.789, 1e21, -1e-7]
        return Bool.random(using: &g) ? specials[Int.random(in: 0 ..< specials.count, using: &g)] : Double(bitPattern: g.next())
    }

    static func item(depth: Int, into out: inout [UInt8], using g: inout SplitMix64) {
        let pick = Int.random(in: 0 ..< (depth > 3 ? 10 : 17), using: &g)
        switch pick {
        case 0:
            let n = [UInt64.random(in: 0 ... 30, using: &g), UInt64.random(in: 0 ... 70000, using: &g), g.next()][Int.random(in: 0 ..< 3, using: &g)]
            out += head(Int.random(in: 0 ..< 2, using: &g) == 0 ? 0 : 1, n, wide: Int.random(in: 0 ..< 6, using: &g) == 0)
        case 1:
            string(2, (0 ..< Int.random(in: 0 ... 20, using: &g)).map { _ in UInt8.random(in: 0 ... 255, using: &g) }, into: &out, using: &g)
        case 2, 3:
            string(3, textBytes(using: &g), into: &out, using: &g)
        case 4:
            let d = floatBits(using: &g)
            switch Int.random(in: 0 ..< 3, using: &g) {
            case 0: out += [0xF9] + withUnsafeBytes(of: UInt16.random(in: 0 ... .max, using: &g).bigEndian, Array.init)
            case 1: out += [0xFA] + withUnsafeBytes(of: (Bool.random(using: &g) ? Float(d).bitPattern : UInt32(truncatingIfNeeded: g.next())).bigEndian, Array.init)
            default: out += [0xFB] + withUnsafeBytes(of: d.bitPattern.bigEndian, Array.init)
            }
        case 5:
            out += [[0xF4], [0xF5], [0xF6], [0xF7], [UInt8(0xE0) | UInt8.random(in: 0 ... 19, using: &g)],
                    [0xF8, UInt8.random(in: 0 ... 255, using: &g)], [0xFF], [0xFC]][Int.random(in: 0 ..< 8, using: &g)]
        case 6:
            // A date: tag 1 or the reference-date tag, around an integer or a float, in and out of range.
            out += Bool.random(using: &g) ? [0xC1] : head(6, CBORTag.referenceDate)
            if Bool.random(using: &g) {
                let seconds = Int64.random(in: -70_000_000_000 ... 260_000_000_000, using: &g)
                out += seconds < 0 ? head(1, UInt64(-1 - seconds)) : head(0, UInt64(seconds))
            } else if Bool.random(using: &g) {
                out += [0xFB] + withUnsafeBytes(of: Double.random(in: -7e10 ... 2.6e11, using: &g).bitPattern.bigEndian, Array.init)
            } else {
                item(depth: depth + 1, into: &out, using: &g)
            }
        case 7:
            out += [0xD8, 0x25]
            switch Int.random(in: 0 ..< 3, using: &g) {
            case 0: string(2, (0 ..< 16).map { _ in UInt8.random(in: 0 ... 255, using: &g) }, into: &out, using: &g)
            case 1: string(3, Array(uuid(using: &g).uuidString.lowercased().utf8), into: &out, using: &g)
            default: item(depth: depth + 1, into: &out, using: &g)
            }
        case 8:
            // A decimal fraction: [exponent, mantissa], the mantissa maybe a bignum.
            out += [0xC4]
            if Int.random(in: 0 ..< 4, using: &g) == 0 { item(depth: depth + 1, into: &out, using: &g); return }
            let indefinite = Bool.random(using: &g)
            out += indefinite ? [0x9F] : [0x82]
            let e = [Int64.random(in: -200 ... 200, using: &g), Int64.random(in: -5 ... 5, using: &g), Int64.min, Int64.max][Int.random(in: 0 ..< 4, using: &g)]
            out += e < 0 ? head(1, UInt64(-1 - e)) : head(0, UInt64(e))
            if Bool.random(using: &g) {
                out += head(Bool.random(using: &g) ? 0 : 1, [g.next() >> 40, g.next(), 1000, 0][Int.random(in: 0 ..< 4, using: &g)])
            } else {
                out += [Bool.random(using: &g) ? 0xC2 : 0xC3]
                string(2, (0 ..< Int.random(in: 0 ... 18, using: &g)).map { _ in UInt8.random(in: 0 ... 255, using: &g) }, into: &out, using: &g)
            }
            if indefinite { out += [0xFF] }
        case 9:
            out += [0xC2 + UInt8.random(in: 0 ... 1, using: &g)]
            if Int.random(in: 0 ..< 4, using: &g) == 0 { item(depth: depth + 1, into: &out, using: &g) } else {
                string(2, (0 ..< Int.random(in: 0 ... 20, using: &g)).map { _ in UInt8.random(in: 0 ... 255, using: &g) }, into: &out, using: &g)
            }
        case 10:
            // Expected conversions (21, 22, 23) and other tags, around anything.
            out += head(6, [21, 22, 23, 55799, 32, 0, g.next()][Int.random(in: 0 ..< 7, using: &g)])
            item(depth: depth + 1, into: &out, using: &g)
        case 11, 12:
            let count = Int.random(in: 0 ... 5, using: &g)
            let indefinite = Int.random(in: 0 ..< 4, using: &g) == 0
            out += indefinite ? [0x9F] : head(4, UInt64(count))
            for _ in 0 ..< count { item(depth: depth + 1, into: &out, using: &g) }
            if indefinite { out += [0xFF] }
        case 13, 14, 15:
            let count = Int.random(in: 0 ... 5, using: &g)
            let indefinite = Int.random(in: 0 ..< 4, using: &g) == 0
            out += indefinite ? [0xBF] : head(5, UInt64(count))
            for _ in 0 ..< count {
                switch Int.random(in: 0 ..< 6, using: &g) {
                case 0, 1: string(3, Array(["a", "b", "café", "cafe\u{301}", "1", "~", "$invalid"][Int.random(in: 0 ..< 7, using: &g)].utf8), into: &out, using: &g)
                case 2: out += head(0, UInt64.random(in: 0 ... 3, using: &g), wide: Bool.random(using: &g))
                case 3: out += [[0xF9, 0x3C, 0x00], [0xFB, 0x3F, 0xF0, 0, 0, 0, 0, 0, 0], [0xF9, 0x7E, 0x00], [0xFA, 0x7F, 0xC0, 0, 0], [0xF4], [0xF6]][Int.random(in: 0 ..< 6, using: &g)]
                default: item(depth: depth + 1, into: &out, using: &g)
                }
                item(depth: depth + 1, into: &out, using: &g)
            }
            if indefinite { out += [0xFF] }
        default:
            // Nesting around the limit of 64 (arrays, maps and tags all count).
            let levels = Int.random(in: 60 ... 66, using: &g)
            for level in 0 ..< levels { out += level % 3 == 2 ? [0xD8, 0x30] : level % 3 == 1 ? [0xA1, 0x61, 0x6B] : [0x81] }
            out += [0x01]
        }
    }

    /// A JSON value held as `CBOREncoder` sees Swift's: dictionaries (which it sorts), arrays, 64-bit
    /// integers, `Double`s, strings, booleans and nil. A number is an integer when its text is one that
    /// fits `Int64` or `UInt64`, a `Double` otherwise (a fraction or an exponent).
    struct NotANumber: Error { var text: String }

    enum Plain: Encodable {
        case null, bool(Bool), int(Int64), uint(UInt64), double(Double), string(String)
        case array([Plain]), object([String: Plain])

        init(_ node: JSONNode) throws {
            switch node.kind {
            case .null: self = .null
            case .bool(let b): self = .bool(b)
            case .number(let text):
                if let n = Int64(text) { self = .int(n) } else if let n = UInt64(text) { self = .uint(n) } else {
                    guard let d = Double(text) else { throw NotANumber(text: text) }
                    self = .double(d)
                }
            case .string(let s): self = .string(s)
            case .array(let items): self = .array(try items.map(Plain.init))
            case .object(let members):
                var object: [String: Plain] = [:]
                for member in members { object[member.key] = try Plain(member.value) }
                self = .object(object)
            }
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case .null: try container.encodeNil()
            case .bool(let b): try container.encode(b)
            case .int(let n): try container.encode(n)
            case .uint(let n): try container.encode(n)
            case .double(let d): try container.encode(d)
            case .string(let s): try container.encode(s)
            case .array(let items): try container.encode(items)
            case .object(let members): try container.encode(members)
            }
        }
    }
}
#endif
