import Foundation
import KVStore

/// The value decoder's property: on any bytes, `CBORValue.decode` and `CBORDecoder` either throw a
/// ``CBORError`` (one line) or return a value; a returned value re-encodes, decodes again, and
/// re-encodes to the same bytes. Nothing traps.
public enum CBORProperty {
    public static func check(_ input: [UInt8]) throws(PropertyViolation) -> FuzzOutcome {
        var accepted = false
        var firstRejection: String?
        func note(_ outcome: FuzzOutcome) {
            switch outcome {
            case .accepted: accepted = true
            case .rejected(let kind): if firstRejection == nil { firstRejection = kind }
            }
        }
        note(try valueTree(input, limits: .default))
        // Tight limits, so that the limit checks themselves meet hostile input.
        _ = try valueTree(input, limits: CBORLimits(maxInputSize: 64, maxDepth: 3))
        note(try typed(FuzzSubscription.self, input))
        note(try typed(FuzzDailyRecord.self, input))
        note(try typed(FuzzScalars.self, input))
        note(try typed(FuzzShape.self, input))
        note(try typed(FuzzTree.self, input))
        note(try typed([Int].self, input))
        note(try typed([String: [Double]].self, input))
        note(try typed([Int: String].self, input))
        note(try typed([UUID].self, input))
        note(try typed(Date.self, input))
        note(try typed(Decimal.self, input))
        note(try typed(LogicalDay.self, input))
        note(try typed([URL?].self, input))
        return accepted ? .accepted : .rejected(firstRejection ?? "none")
    }

    /// `CBORValue.decode`, and the round trip of what it returns.
    static func valueTree(_ input: [UInt8], limits: CBORLimits) throws(PropertyViolation) -> FuzzOutcome {
        let value: CBORValue
        do {
            value = try CBORValue.decode(input, limits: limits)
        } catch {
            return try rejection(error, "CBORValue.decode")
        }
        _ = value.description
        let encoded = value.encoded()
        let again: CBORValue
        do {
            again = try CBORValue.decode(encoded, limits: CBORLimits(maxInputSize: .max, maxDepth: limits.maxDepth))
        } catch {
            throw PropertyViolation("CBORValue \(value) re-encodes to \(hex(encoded)), which does not decode: \(error)")
        }
        try require(again == value, "CBORValue \(value) re-encodes to \(hex(encoded)), which decodes to \(again)")
        try require(again.encoded() == encoded, "CBORValue \(value) encodes differently the second time")
        return .accepted
    }

    /// `CBORDecoder` into `T`, and the round trip through `CBOREncoder`.
    static func typed<T: Codable>(_ type: T.Type, _ input: [UInt8]) throws(PropertyViolation) -> FuzzOutcome {
        let value: T
        do {
            value = try CBORDecoder().decode(T.self, from: input)
        } catch {
            return try rejection(error, "CBORDecoder.decode(\(T.self))")
        }
        let encoded: [UInt8]
        do {
            encoded = try CBOREncoder().encode(value)
        } catch {
            throw PropertyViolation("\(T.self) decoded from \(hex(input)) does not re-encode: \(error)")
        }
        let again: T
        do {
            again = try CBORDecoder().decode(T.self, from: encoded)
        } catch {
            throw PropertyViolation("\(T.self) decoded from \(hex(input)) re-encodes to \(hex(encoded)), which does not decode: \(error)")
        }
        let encodedAgain: [UInt8]
        do {
            encodedAgain = try CBOREncoder().encode(again)
        } catch {
            throw PropertyViolation("\(T.self) decoded from \(hex(encoded)) does not re-encode: \(error)")
        }
        try require(encodedAgain == encoded,
                    "\(T.self) decoded from \(hex(input)): encoding, decoding and encoding again gives \(hex(encodedAgain)), not \(hex(encoded))")
        return .accepted
    }

    /// An error from decoding must be a one-line ``CBORError``.
    static func rejection(_ error: any Error, _ what: String) throws(PropertyViolation) -> FuzzOutcome {
        guard let error = error as? CBORError else {
            throw PropertyViolation("\(what) threw \(type(of: error)), not CBORError: \(error)")
        }
        try require(!error.description.contains("\n") && !error.description.contains("\r"),
                    "\(what): CBORError description is not one line: \(error.description.debugDescription)")
        return .rejected(error.kind.rawValue)
    }
}

// MARK: - Value types shaped like the store's

/// Like the subscription tracker's Subscription: money as `Decimal`, dates, a day, optional fields.
struct FuzzSubscription: Codable {
    var id: UUID
    var name: String
    var price: Decimal
    var currency: String
    var startedAt: Date
    var renewsOn: LogicalDay?
    var active: Bool
    var tags: [String]
    var website: URL?
    var notes: [String: String]
}

/// Like the checklist's DailyRecord: scores by item, memos and the denormalised cache fields.
struct FuzzDailyRecord: Codable {
    var day: LogicalDay
    var scores: [String: Int]
    var memos: [String: String]
    var cachedCategoryAverages: [String: Double]
    var cachedTotalAverage: Double?
    var cachedInputCount: Int
    var updatedAt: Date
}

/// Every scalar width, so that each range check meets out-of-range numbers.
struct FuzzScalars: Codable {
    var i: Int
    var i8: Int8
    var i16: Int16
    var i32: Int32
    var i64: Int64
    var u: UInt
    var u8: UInt8
    var u16: UInt16
    var u32: UInt32
    var u64: UInt64
    var f: Float
    var d: Double
    var b: Bool
    var data: Data
    var s: String?
}

/// An enum with associated values (synthesised Codable: nested keyed and unkeyed containers).
enum FuzzShape: Codable {
    case circle(radius: Double)
    case rect(width: Float, height: Float)
    case point
    case labelled(String, [Int8])
}

/// A recursive type: decoding it recurses once per level, which `CBORLimits.maxDepth` bounds.
indirect enum FuzzTree: Codable {
    case leaf(UInt16)
    case node([FuzzTree])
}
