// Nothing in this file uses Foundation: the reader works on an `UnsafeRawPointer` and offsets.

/// Reads CBOR from a raw buffer by offset. Every read is bounds-checked and throws ``CBORError``;
/// nothing here traps on any input.
package struct CBORReader {
    package let base: UnsafeRawPointer
    /// The number of readable bytes; offsets run from 0 to `end`.
    package let end: Int

    /// The initial byte and argument of a data item.
    package struct Head {
        /// Major type, 0–7.
        package let major: UInt8
        /// Additional information, 0–27 or 31.
        package let info: UInt8
        /// The argument: a value, a length, a count, a tag number or float bits. 0 when indefinite.
        package let argument: UInt64
        /// The offset just after the head.
        package let next: Int
        package var isIndefinite: Bool { info == 31 }
    }

    package init(base: UnsafeRawPointer, end: Int) {
        self.base = base
        self.end = end
    }

    /// Checks the size limit and the well-formedness of the whole input, and returns a reader for it.
    /// Throws what decoding `bytes` would throw for their size, nesting and well-formedness, without
    /// building anything: how writers refuse values that readers would refuse.
    package static func check(_ bytes: [UInt8], limits: CBORLimits) throws {
        try bytes.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) throws -> Void in
            _ = try validated(buffer, limits: limits)
        }
    }

    /// A reader over `bytes` once they are checked: within `limits`, exactly one well-formed item. With
    /// `checkingText` false, text strings are left for ``text(_:at:)`` to check as they are read (the
    /// typed decoder makes a String of each text it reads, which checks the UTF-8 anyway; text it never
    /// reads never becomes a String).
    static func validated(_ bytes: UnsafeRawBufferPointer, limits: CBORLimits, checkingText: Bool = true) throws(CBORError) -> CBORReader {
        guard bytes.count <= limits.maxInputSize else {
            throw CBORError(.limitExceeded, "input is \(bytes.count) bytes, over the maxInputSize limit of \(limits.maxInputSize)")
        }
        guard let base = bytes.baseAddress, bytes.count > 0 else {
            throw CBORError(.truncated, "the input is empty", offset: 0)
        }
        let reader = CBORReader(base: base, end: bytes.count)
        try reader.validate(maxDepth: limits.maxDepth, checkingText: checkingText)
        return reader
    }

    @inline(__always)
    func byte(_ offset: Int) -> UInt8 {
        base.load(fromByteOffset: offset, as: UInt8.self)
    }

    /// Reads the head of the data item at `p`.
    @inline(__always)
    package func head(at p: Int) throws(CBORError) -> Head {
        guard p >= 0, p < end else {
            throw CBORError(.truncated, "expected a data item, but the input ends", offset: p)
        }
        let initial = byte(p)
        let major = initial >> 5
        let info = initial & 0x1F
        if info < 24 {
            return Head(major: major, info: info, argument: UInt64(info), next: p + 1)
        }
        if info == 31 { return Head(major: major, info: info, argument: 0, next: p + 1) }
        guard let size = CBORHead.argumentSize(info) else {
            throw CBORError(.malformed, "reserved additional information \(info) in initial byte 0x\(Hex.encode([initial]))", offset: p)
        }
        guard end - p - 1 >= size else {
            throw CBORError(.truncated, "\(Self.majorName(major)) needs \(size) bytes for its argument, \(end - p - 1) remain", offset: p)
        }
        let argument: UInt64
        switch size {
        case 1: argument = UInt64(byte(p + 1))
        case 2: argument = UInt64(UInt16(bigEndian: base.loadUnaligned(fromByteOffset: p + 1, as: UInt16.self)))
        case 4: argument = UInt64(UInt32(bigEndian: base.loadUnaligned(fromByteOffset: p + 1, as: UInt32.self)))
        default: argument = UInt64(bigEndian: base.loadUnaligned(fromByteOffset: p + 1, as: UInt64.self))
        }
        return Head(major: major, info: info, argument: argument, next: p + 1 + size)
    }

    /// The length of a definite-length string whose head is `h` (at `p`), checked against what remains.
    @inline(__always)
    func length(_ h: Head, at p: Int) throws(CBORError) -> Int {
        let remain = end - h.next
        guard h.argument <= UInt64(remain) else {
            throw CBORError(.truncated, "\(Self.majorName(h.major)) needs \(h.argument) bytes, \(remain) remain", offset: p)
        }
        return Int(h.argument)
    }

    /// Whether the item at `p` is null or undefined.
    @inline(__always)
    func isNil(at p: Int) -> Bool {
        p >= 0 && p < end && (byte(p) == 0xF6 || byte(p) == 0xF7)
    }

    /// The head of the first item at `p` that is not a tag (the tags are skipped).
    @inline(__always)
    func untagged(at p: Int) throws(CBORError) -> (head: Head, offset: Int) {
        var q = p
        var h = try head(at: q)
        while h.major == 6 {
            q = h.next
            h = try head(at: q)
        }
        return (h, q)
    }

    // MARK: Well-formedness

    private struct Frame {
        /// Items still to come for a definite-length container; unused when indefinite.
        var remaining: Int
        var indefinite: Bool
        var isMap: Bool
        /// Items seen so far in an indefinite-length map (for the key/value parity check).
        var seen: Int
        var start: Int
    }

    /// Checks that the buffer holds exactly one well-formed data item no deeper than `maxDepth`,
    /// with valid UTF-8 text. Iterative, so no input can exhaust the stack here.
    ///
    /// The innermost open container is kept in a local (`top`), and only the ones around it on a
    /// stack, so that counting an item down does not go through the array (about 5% of this pass on a
    /// `DailyRecord`).
    func validate(maxDepth: Int, checkingText: Bool = true) throws(CBORError) {
        var outer: [Frame] = []
        outer.reserveCapacity(Swift.min(Swift.max(maxDepth, 0), 16))
        // A frame around the top-level item, which is not a container: `depth` counts the real ones.
        var top = Frame(remaining: 1, indefinite: false, isMap: false, seen: 0, start: 0)
        var depth = 0
        var p = 0
        while true {
            while !top.indefinite && top.remaining == 0 {
                guard let parent = outer.popLast() else {
                    guard p == end else {
                        throw CBORError(.trailingBytes, "\(end - p) bytes follow the top-level data item", offset: p)
                    }
                    return
                }
                top = parent
                depth -= 1
            }
            if top.indefinite {
                guard p < end else {
                    throw CBORError(.truncated, "indefinite-length \(top.isMap ? "map" : "array") starting at byte \(top.start) has no break (0xFF)", offset: p)
                }
                if byte(p) == 0xFF {
                    if top.isMap && top.seen & 1 == 1 {
                        throw CBORError(.malformed, "indefinite-length map starting at byte \(top.start) ends after a key with no value", offset: p)
                    }
                    // An indefinite-length frame is never the top-level one, so there is a parent.
                    guard let parent = outer.popLast() else { throw CBORError(.malformed, "unbalanced break (0xFF)", offset: p) }
                    top = parent
                    depth -= 1
                    p += 1
                    continue
                }
                top.seen += 1
            } else {
                top.remaining -= 1
            }
            let h = try head(at: p)
            switch h.major {
            case 0, 1:
                if h.isIndefinite {
                    throw CBORError(.malformed, "an integer cannot have indefinite length (initial byte 0x\(Hex.encode([byte(p)])))", offset: p)
                }
                p = h.next
            case 2, 3:
                p = try validateString(h, at: p, checkingText: checkingText)
            case 4, 5:
                guard depth < maxDepth else {
                    throw CBORError(.limitExceeded, "nesting is deeper than maxDepth (\(maxDepth))", offset: p)
                }
                let isMap = h.major == 5
                let frame: Frame
                if h.isIndefinite {
                    frame = Frame(remaining: 0, indefinite: true, isMap: isMap, seen: 0, start: p)
                } else {
                    let available = UInt64(end - h.next)
                    guard isMap ? h.argument <= available / 2 : h.argument <= available else {
                        throw CBORError(.truncated, "\(isMap ? "map declares \(h.argument) entries" : "array declares \(h.argument) items"), but only \(available) bytes remain", offset: p)
                    }
                    let count = Int(h.argument) * (isMap ? 2 : 1)
                    frame = Frame(remaining: count, indefinite: false, isMap: isMap, seen: 0, start: p)
                }
                outer.append(top)
                top = frame
                depth += 1
                p = h.next
            case 6:
                if h.isIndefinite {
                    throw CBORError(.malformed, "a tag cannot have indefinite length (initial byte 0xdf)", offset: p)
                }
                guard depth < maxDepth else {
                    throw CBORError(.limitExceeded, "nesting is deeper than maxDepth (\(maxDepth))", offset: p)
                }
                outer.append(top)
                top = Frame(remaining: 1, indefinite: false, isMap: false, seen: 0, start: p)
                depth += 1
                p = h.next
            default:
                switch h.info {
                case 24 where h.argument < 32:
                    throw CBORError(.malformed, "simple value \(h.argument) must use the one-byte form", offset: p)
                case 31:
                    throw CBORError(.malformed, "unexpected break (0xFF) outside an indefinite-length array, map or string", offset: p)
                default: break
                }
                p = h.next
            }
        }
    }

    /// Checks a byte or text string (definite or chunked) and returns the offset after it.
    private func validateString(_ h: Head, at p: Int, checkingText: Bool = true) throws(CBORError) -> Int {
        let isText = h.major == 3 && checkingText
        if !h.isIndefinite {
            let count = try length(h, at: p)
            if isText { try checkUTF8(from: h.next, count: count) }
            return h.next + count
        }
        var q = h.next
        while true {
            guard q < end else {
                throw CBORError(.truncated, "indefinite-length \(Self.majorName(h.major)) starting at byte \(p) has no break (0xFF)", offset: q)
            }
            if byte(q) == 0xFF { return q + 1 }
            let chunk = try head(at: q)
            guard chunk.major == h.major, !chunk.isIndefinite else {
                throw CBORError(.malformed, "a chunk of an indefinite-length \(Self.majorName(h.major)) must be a definite-length \(Self.majorName(h.major)), found \(describe(chunk))", offset: q)
            }
            let count = try length(chunk, at: q)
            if isText { try checkUTF8(from: chunk.next, count: count) }
            q = chunk.next + count
        }
    }

    func checkUTF8(from start: Int, count: Int) throws(CBORError) {
        if let bad = Self.firstInvalidUTF8(base, from: start, count: count) {
            throw CBORError(.invalidUTF8, "text string has an invalid UTF-8 sequence starting with 0x\(Hex.encode([byte(bad)]))", offset: bad)
        }
    }

    /// The offset of the first byte of an invalid UTF-8 sequence in `start ..< start + count`, or nil.
    static func firstInvalidUTF8(_ base: UnsafeRawPointer, from start: Int, count: Int) -> Int? {
        var i = start
        let end = start + count
        while i < end {
            if end - i >= 8 {
                let word = base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
                if word & 0x8080_8080_8080_8080 == 0 {
                    i += 8
                    continue
                }
            }
            let b0 = base.load(fromByteOffset: i, as: UInt8.self)
            if b0 < 0x80 {
                i += 1
                continue
            }
            let trailing: Int
            var low: UInt8 = 0x80
            var high: UInt8 = 0xBF
            switch b0 {
            case 0xC2...0xDF: trailing = 1
            case 0xE0: trailing = 2; low = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: trailing = 2
            case 0xED: trailing = 2; high = 0x9F
            case 0xF0: trailing = 3; low = 0x90
            case 0xF1...0xF3: trailing = 3
            case 0xF4: trailing = 3; high = 0x8F
            default: return i
            }
            guard end - i > trailing else { return i }
            let b1 = base.load(fromByteOffset: i + 1, as: UInt8.self)
            guard b1 >= low && b1 <= high else { return i }
            var k = 2
            while k <= trailing {
                guard base.load(fromByteOffset: i + k, as: UInt8.self) & 0xC0 == 0x80 else { return i }
                k += 1
            }
            i += trailing + 1
        }
        return nil
    }

    // MARK: Skipping and reading

    /// The offset just after the data item at `p`.
    ///
    /// Definite-length arrays and maps, nearly all of what is skipped, are walked in one loop that
    /// counts the items still to pass, not by a call per item (on a `DailyRecord`, 37 instructions an
    /// item against 56). Indefinite-length items go through ``skipNested(_:)``, which recurses: use on
    /// validated input only, whose depth is bounded by ``CBORLimits/maxDepth``.
    func skip(_ p: Int) throws(CBORError) -> Int {
        var q = p
        // Every item takes at least one byte, so a count above the bytes left is truncated input.
        var pending = 1
        while pending > 0 {
            let h = try head(at: q)
            pending -= 1
            switch h.major {
            case 0, 1, 7:
                q = h.next
            case 2 where !h.isIndefinite, 3 where !h.isIndefinite:
                q = h.next + (try length(h, at: q))
            case 4 where !h.isIndefinite, 5 where !h.isIndefinite:
                // The items still pending each need a byte too: checked so, `pending` never exceeds
                // the input's size (and cannot overflow).
                let room = end - h.next - pending
                guard h.argument <= UInt64(max(room, 0)), Int(h.argument) * (h.major == 5 ? 2 : 1) <= room else {
                    throw CBORError(.truncated, "\(Self.majorName(h.major)) has \(h.argument) items, \(end - h.next) bytes remain", offset: q)
                }
                pending += Int(h.argument) * (h.major == 5 ? 2 : 1)
                q = h.next
            case 6:
                pending += 1
                q = h.next
            default:
                q = try skipNested(q)
            }
        }
        return q
    }

    /// ``skip(_:)`` by recursion, for indefinite-length items.
    private func skipNested(_ p: Int) throws(CBORError) -> Int {
        let h = try head(at: p)
        switch h.major {
        case 0, 1, 7:
            return h.next
        case 2, 3:
            if !h.isIndefinite { return h.next + (try length(h, at: p)) }
            var q = h.next
            while true {
                guard q < end else { throw CBORError(.truncated, "indefinite-length string has no break (0xFF)", offset: q) }
                if byte(q) == 0xFF { return q + 1 }
                let chunk = try head(at: q)
                q = chunk.next + (try length(chunk, at: q))
            }
        case 4, 5:
            var q = h.next
            if h.isIndefinite {
                while true {
                    guard q < end else { throw CBORError(.truncated, "indefinite-length container has no break (0xFF)", offset: q) }
                    if byte(q) == 0xFF { return q + 1 }
                    q = try skip(q)
                }
            }
            var i: UInt64 = 0
            while i < h.argument {
                q = try skip(q)
                if h.major == 5 { q = try skip(q) }
                i += 1
            }
            return q
        default:
            return try skip(h.next)
        }
    }

    /// The float value of a major-type-7 head with additional information 25, 26 or 27.
    @inline(__always)
    static func floatValue(_ h: Head) -> Double? {
        guard h.major == 7 else { return nil }
        switch h.info {
        case 25: return halfToDouble(UInt16(truncatingIfNeeded: h.argument))
        case 26: return Double(Float(bitPattern: UInt32(truncatingIfNeeded: h.argument)))
        case 27: return Double(bitPattern: h.argument)
        default: return nil
        }
    }

    /// Converts IEEE 754 binary16 bits to a Double exactly (without the `Float16` type, which is
    /// missing on some platforms).
    static func halfToDouble(_ bits: UInt16) -> Double {
        let exponent = Int((bits >> 10) & 0x1F)
        let fraction = Int(bits & 0x3FF)
        let magnitude: Double
        if exponent == 0 {
            magnitude = Double(fraction) * 0x1p-24
        } else if exponent == 31 {
            magnitude = fraction == 0 ? .infinity : .nan
        } else {
            magnitude = Double(sign: .plus, exponent: exponent - 25, significand: Double(fraction + 1024))
        }
        return bits & 0x8000 != 0 ? -magnitude : magnitude
    }

    /// Calls `body` with the bytes of the byte or text string whose head is `h` (at `p`), contiguous
    /// (chunks of an indefinite-length string are joined), and returns the offset after the string.
    @inline(__always)
    func withStringBytes<R>(_ h: Head, at p: Int, _ body: (UnsafeRawBufferPointer) -> R) throws(CBORError) -> (value: R, next: Int) {
        if !h.isIndefinite {
            let count = try length(h, at: p)
            return (body(UnsafeRawBufferPointer(start: base + h.next, count: count)), h.next + count)
        }
        var joined: [UInt8] = []
        var q = h.next
        while true {
            guard q < end else { throw CBORError(.truncated, "indefinite-length \(Self.majorName(h.major)) has no break (0xFF)", offset: q) }
            if byte(q) == 0xFF { break }
            let chunk = try head(at: q)
            guard chunk.major == h.major, !chunk.isIndefinite else {
                throw CBORError(.malformed, "a chunk of an indefinite-length \(Self.majorName(h.major)) must be a definite-length \(Self.majorName(h.major))", offset: q)
            }
            let count = try length(chunk, at: q)
            joined.append(contentsOf: UnsafeRawBufferPointer(start: base + chunk.next, count: count))
            q = chunk.next + count
        }
        let value = joined.withUnsafeBytes { body($0) }
        return (value, q + 1)
    }

    /// Reads a text string whose head is `h` (at `p`).
    @inline(__always)
    /// Checks the UTF-8 as it makes the String (each chunk of an indefinite-length text on its own, as
    /// RFC 8949 requires), so that text is checked once, not once by validation and again here.
    func text(_ h: Head, at p: Int) throws(CBORError) -> (value: String, next: Int) {
        if h.isIndefinite { _ = try validateString(h, at: p) }
        let (string, next) = try withStringBytes(h, at: p) { Self.string($0) }
        if let string { return (string, next) }
        _ = try validateString(h, at: p)   // throws, naming the first bad byte
        throw CBORError(.invalidUTF8, "text string is not valid UTF-8", offset: p)
    }

    /// The String of `count` bytes at `start`, which must be valid UTF-8 (a map key, say).
    func text(from start: Int, count: Int) throws(CBORError) -> String {
        if let string = Self.string(UnsafeRawBufferPointer(start: base + start, count: count)) { return string }
        try checkUTF8(from: start, count: count)
        throw CBORError(.invalidUTF8, "text string is not valid UTF-8", offset: start)
    }

    /// The String of these UTF-8 bytes, or nil if they are not valid UTF-8.
    ///
    /// The bytes are checked once, then copied: ASCII (the usual case for keys) eight bytes at a time
    /// here, anything else by `UTF8Span(validating:)`; `String(copying:)` then trusts the span.
    /// (`String(validating:)` and `String(decoding:)` check the bytes again while copying them: a
    /// 96-byte Japanese memo cost 2,470 instructions that way, against 1,710 this way, and an ASCII
    /// key about 10% more.)
    @inline(__always)
    package static func string(_ bytes: UnsafeRawBufferPointer) -> String? {
        let units = bytes.assumingMemoryBound(to: UInt8.self)
        if isASCII(bytes) { return String(copying: unsafe UTF8Span(unchecked: units.span, isKnownASCII: true)) }
        guard let checked = try? UTF8Span(validating: units.span) else { return nil }
        return String(copying: checked)
    }

    @inline(__always)
    package static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        var i = 0
        var bits: UInt64 = 0
        while i + 8 <= bytes.count {
            bits |= base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            i += 8
        }
        while i < bytes.count {
            bits |= UInt64(base.load(fromByteOffset: i, as: UInt8.self))
            i += 1
        }
        return bits & 0x8080_8080_8080_8080 == 0
    }

    /// Builds the ``CBORValue`` tree of the item at `p`. Recursive: use on validated input.
    func readValue(at p: Int) throws(CBORError) -> (value: CBORValue, next: Int) {
        let h = try head(at: p)
        switch h.major {
        case 0: return (.unsigned(h.argument), h.next)
        case 1: return (.negative(h.argument), h.next)
        case 2:
            let (bytes, next) = try withStringBytes(h, at: p) { [UInt8]($0) }
            return (.bytes(bytes), next)
        case 3:
            let (string, next) = try text(h, at: p)
            return (.text(string), next)
        case 4:
            var items: [CBORValue] = []
            var q = h.next
            if h.isIndefinite {
                while q < end, byte(q) != 0xFF {
                    let (item, next) = try readValue(at: q)
                    items.append(item)
                    q = next
                }
                guard q < end else { throw CBORError(.truncated, "indefinite-length array has no break (0xFF)", offset: q) }
                return (.array(items), q + 1)
            }
            items.reserveCapacity(Int(Swift.min(h.argument, UInt64(end - q))))
            var i: UInt64 = 0
            while i < h.argument {
                let (item, next) = try readValue(at: q)
                items.append(item)
                q = next
                i += 1
            }
            return (.array(items), q)
        case 5:
            var entries: [CBORMapEntry] = []
            var q = h.next
            var starts: [Int] = []
            if h.isIndefinite {
                while q < end, byte(q) != 0xFF {
                    starts.append(q)
                    let (key, afterKey) = try readValue(at: q)
                    let (value, next) = try readValue(at: afterKey)
                    entries.append(CBORMapEntry(key: key, value: value))
                    q = next
                }
                guard q < end else { throw CBORError(.truncated, "indefinite-length map has no break (0xFF)", offset: q) }
                q += 1
            } else {
                entries.reserveCapacity(Int(Swift.min(h.argument, UInt64(end - q) / 2)))
                var i: UInt64 = 0
                while i < h.argument {
                    starts.append(q)
                    let (key, afterKey) = try readValue(at: q)
                    let (value, next) = try readValue(at: afterKey)
                    entries.append(CBORMapEntry(key: key, value: value))
                    q = next
                    i += 1
                }
            }
            try Self.checkDuplicates(entries, starts: starts)
            return (.map(entries), q)
        case 6:
            let (item, next) = try readValue(at: h.next)
            return (.tagged(h.argument, item), next)
        default:
            switch h.info {
            case 20: return (.bool(false), h.next)
            case 21: return (.bool(true), h.next)
            case 22: return (.null, h.next)
            case 23: return (.undefined, h.next)
            case 25, 26, 27: return (.float(Self.floatValue(h) ?? .nan), h.next)
            case 31: throw CBORError(.malformed, "unexpected break (0xFF)", offset: p)
            default: return (.simple(UInt8(truncatingIfNeeded: h.argument)), h.next)
            }
        }
    }

    private static func checkDuplicates(_ entries: [CBORMapEntry], starts: [Int]) throws(CBORError) {
        if entries.count < 2 { return }
        if entries.count <= 16 {
            for i in 1 ..< entries.count {
                for j in 0 ..< i where entries[i].key == entries[j].key {
                    throw CBORError(.duplicateKey, "map has the key \(entries[i].key) twice", offset: starts[i])
                }
            }
            return
        }
        var seen = Set<CBORValue>(minimumCapacity: entries.count)
        for (i, entry) in entries.enumerated() where !seen.insert(entry.key).inserted {
            throw CBORError(.duplicateKey, "map has the key \(entry.key) twice", offset: starts[i])
        }
    }

    // MARK: Descriptions

    static func majorName(_ major: UInt8) -> String {
        switch major {
        case 0: "unsigned integer"
        case 1: "negative integer"
        case 2: "byte string"
        case 3: "text string"
        case 4: "array"
        case 5: "map"
        case 6: "tag"
        default: "simple value or float"
        }
    }

    /// A short description of the item with head `h`, for error messages: `text string (5 bytes)`.
    func describe(_ h: Head) -> String {
        switch h.major {
        case 0: return "unsigned integer \(h.argument)"
        case 1: return "negative integer \(Self.negativeString(h.argument))"
        case 2, 3: return h.isIndefinite ? "indefinite-length \(Self.majorName(h.major))" : "\(Self.majorName(h.major)) (\(h.argument) bytes)"
        case 4: return h.isIndefinite ? "indefinite-length array" : "array of \(h.argument) items"
        case 5: return h.isIndefinite ? "indefinite-length map" : "map of \(h.argument) entries"
        case 6: return "tag \(h.argument)"
        default:
            switch h.info {
            case 20: return "false"
            case 21: return "true"
            case 22: return "null"
            case 23: return "undefined"
            case 25, 26, 27: return "float \(Self.floatValue(h) ?? .nan)"
            case 31: return "break"
            default: return "simple value \(h.argument)"
            }
        }
    }

    /// The decimal text of the negative integer -1 - n.
    static func negativeString(_ n: UInt64) -> String {
        n == .max ? "-18446744073709551616" : "-\(n + 1)"
    }
}

/// What every reader of CBOR heads shares (this one, and SyncKit's direct history-entry reader).
package enum CBORHead {
    /// How many bytes of argument follow an initial byte whose additional information is `info`:
    /// 1, 2, 4 or 8 for 24 to 27; `nil` for anything else (less than 24 is the argument itself, 31 an
    /// indefinite length, 28 to 30 reserved).
    @inline(__always)
    package static func argumentSize(_ info: UInt8) -> Int? {
        info >= 24 && info <= 27 ? 1 << Int(info - 24) : nil
    }
}
