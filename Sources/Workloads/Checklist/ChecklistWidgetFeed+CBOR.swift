import KVStore

extension ChecklistWidgetFeed {
    /// The payload read by hand from the CBOR that `CBOREncoder` writes for it, or `nil` when `bytes`
    /// are anything else: what the widget's `WidgetFeed.payloadDecoder` does before falling
    /// back to `CBORDecoder`.
    ///
    /// Why: decoding a `Codable` type through `CBORDecoder`'s keyed containers makes the Swift runtime
    /// instantiate `KeyedDecodingContainer<CodingKeys>` for each of the payload's three types, and
    /// each first instantiation scans every protocol conformance record of the process (4,000 in the
    /// lean widget): about 0.5M instructions of the widget's start in all (issue 39).
    ///
    /// The bytes are parsed by `CBORValue.decode(_:limits:)` (the default limits:
    /// bounded size and depth, UTF-8 checked, duplicate map keys refused; it never traps), then mapped
    /// field by field. Only the forms the encoder writes are taken: a map of the six fields under
    /// their names (the optional ones absent or null), days as `YYYY-MM-DD` text, doubles as floats,
    /// integers as integers, the category as its raw text. Anything else, unknown keys included, gives
    /// `nil`, and `CBORDecoder` then decides, with its own error. Each form taken is one `CBORDecoder`
    /// reads to the same value; `ChecklistWidgetFeedCBORTests` compares the two on encoded, mutated,
    /// truncated and random bytes.
    public static func decodeEncodedCBOR(_ bytes: [UInt8]) -> ChecklistWidgetFeed? {
        guard let value = try? CBORValue.decode(bytes), case .map(let entries) = value else { return nil }
        var day: LogicalDay?, total: Double?, averages: [String: Double]?, streak: Streak?
        var latest: LatestMessage?, transaction: Int?
        for entry in entries {
            guard case .text(let key) = entry.key else { return nil }
            switch key {
            case "day": guard let value = Self.day(entry.value) else { return nil }; day = value
            case "totalAverage":
                if case .null = entry.value { continue }
                guard case .float(let value) = entry.value else { return nil }
                total = value
            case "categoryAverages":
                guard case .map(let pairs) = entry.value else { return nil }
                var map: [String: Double] = [:]
                map.reserveCapacity(pairs.count)
                for pair in pairs {
                    guard case .text(let name) = pair.key, case .float(let average) = pair.value else { return nil }
                    map[name] = average
                }
                averages = map
            case "streak":
                guard case .map(let fields) = entry.value, fields.count == 2 else { return nil }
                var current: Int?, longest: Int?
                for field in fields {
                    guard case .text(let name) = field.key, let number = Self.integer(field.value) else { return nil }
                    switch name {
                    case "current": current = number
                    case "longest": longest = number
                    default: return nil
                    }
                }
                guard let current, let longest else { return nil }
                streak = Streak(current: current, longest: longest)
            case "latestMessage":
                if case .null = entry.value { continue }
                guard case .map(let fields) = entry.value, fields.count == 3 else { return nil }
                var messageDay: LogicalDay?, category: ChecklistCategory?, text: String?
                for field in fields {
                    guard case .text(let name) = field.key else { return nil }
                    switch name {
                    case "day": messageDay = Self.day(field.value)
                    case "category":
                        guard case .text(let raw) = field.value else { return nil }
                        category = ChecklistCategory(rawValue: raw)
                    case "text":
                        guard case .text(let value) = field.value else { return nil }
                        text = value
                    default: return nil
                    }
                }
                guard let messageDay, let category, let text else { return nil }
                latest = LatestMessage(day: messageDay, category: category, text: text)
            case "sourceTransactionID":
                guard let value = Self.integer(entry.value) else { return nil }
                transaction = value
            default:
                return nil
            }
        }
        guard let day, let averages, let streak, let transaction else { return nil }
        return ChecklistWidgetFeed(day: day, totalAverage: total, categoryAverages: averages, streak: streak,
                                   latestMessage: latest, sourceTransactionID: transaction)
    }

    /// A day as the encoder writes it: its `YYYY-MM-DD` text.
    private static func day(_ value: CBORValue) -> LogicalDay? {
        guard case .text(let text) = value else { return nil }
        return LogicalDay(text)
    }

    /// An `Int` written as a CBOR integer (major type 0 or 1), if it fits.
    private static func integer(_ value: CBORValue) -> Int? {
        switch value {
        case .unsigned(let n): return Int(exactly: n)
        case .negative(let n): return n <= UInt64(Int.max) ? -1 - Int(n) : nil
        default: return nil
        }
    }
}
