/// A device's request on a blob of its group (issue 49): `HEAD`, `PUT` or `GET /v1/blobs/HASH`, with
/// what its headers say, read before a byte of its body (``GatewayRequestHead``).
///
/// - `HEAD`: where the server's copy stands (``GatewayHeader/uploadOffset``,
///   ``GatewayHeader/uploadLength``, ``GatewayHeader/blobComplete``), 404 when it has none.
/// - `PUT` with `Upload-Offset: N` and `Upload-Length: SIZE`: the body is the chunk at `N` (at most
///   ``BlobWire/chunkBytes``), as tus 1.0's `PATCH`; a body over the chunk, or a `SIZE` over the
///   gateway's largest file, is refused 413 before it is read.
/// - `GET`, with at most one byte range (``ByteRangeRequest``).
package struct BlobRequest: Equatable, Sendable {
    /// The methods a blob takes.
    package enum Verb: String, CaseIterable, Sendable {
        case head = "HEAD", put = "PUT", get = "GET"
    }

    /// Where a `PUT`'s chunk goes, and the whole blob's size.
    package struct Upload: Equatable, Sendable {
        package var offset: Int64
        package var length: Int64

        package init(offset: Int64, length: Int64) { (self.offset, self.length) = (offset, length) }
    }

    package var verb: Verb
    package var hash: BlobHash
    /// A `PUT`'s `Upload-Offset` and `Upload-Length` (`nil` for the others).
    package var upload: Upload?
    /// A `GET`'s byte range (`nil`: the whole blob).
    package var range: ByteRangeRequest?

    package init(verb: Verb, hash: BlobHash, upload: Upload? = nil, range: ByteRangeRequest? = nil) {
        (self.verb, self.hash, self.upload, self.range) = (verb, hash, upload, range)
    }

    /// Reads the blob's headers (`header`: every value of a header, by its name in lower case): a
    /// `PUT`'s offset and length, a `GET`'s range. `contentLength` is the body's declared length (`nil`
    /// without a `Content-Length`). The order of the checks is the order of the answers: a missing
    /// length (411), a chunk over ``BlobWire/chunkBytes`` (413 `chunk_too_large`), the offset and the
    /// size (400), a size over `maxFileBytes` (413 `too_large`), a chunk past the size (400).
    package mutating func readHeaders(header: (String) -> [String], contentLength: Int?, maxFileBytes: Int64) throws(GatewayRefusal) {
        guard verb == .put else {
            guard (contentLength ?? 0) == 0 else { throw GatewayRefusal(.badRequest, "this request takes no body") }
            // RFC 9110 §14.2: a Range means something on a GET only; a HEAD's is ignored. An If-Range
            // names a validator this gateway gives none of, so it never matches: the whole blob is sent.
            if verb == .get, header("if-range").isEmpty {
                let ranges = header(GatewayHeader.range.lowercased)
                guard ranges.count <= 1 else { throw GatewayRefusal(.badRequest, "more than one Range header") }
                if let text = ranges.first { range = try ByteRangeRequest(parsing: text) }
            }
            return
        }
        guard let contentLength else { throw GatewayRefusal(.lengthRequired, "a blob's PUT needs a Content-Length") }
        guard contentLength <= BlobWire.chunkBytes else {
            throw GatewayRefusal(.payloadTooLarge, Self.line(.chunkTooLarge(limit: Int64(BlobWire.chunkBytes)))!,
                                 blobOutcome: .chunkTooLarge(limit: Int64(BlobWire.chunkBytes)))
        }
        let offset = try Self.number(header, .uploadOffset), length = try Self.number(header, .uploadLength)
        guard length <= maxFileBytes else {
            throw GatewayRefusal(.payloadTooLarge, Self.line(.tooLarge(limit: maxFileBytes))!, blobOutcome: .tooLarge(limit: maxFileBytes))
        }
        guard offset <= length, Int64(contentLength) <= length - offset else {
            throw GatewayRefusal(.badRequest, "the chunk ends past the blob's end: Upload-Offset plus the Content-Length is over Upload-Length")
        }
        upload = Upload(offset: offset, length: length)
    }

    /// The one value of header `name`: a number of bytes, decimal digits only (leading zeros and
    /// spaces around it allowed), under 2^63. A sign, another character, an empty value or a second
    /// header is refused (400) in a line that names the header and nothing of its value.
    package static func number(_ header: (String) -> [String], _ name: GatewayHeader) throws(GatewayRefusal) -> Int64 {
        let values = header(name.lowercased)
        guard let text = values.first else { throw GatewayRefusal(.badRequest, "a blob's PUT needs an \(name.rawValue) header") }
        guard values.count == 1 else { throw GatewayRefusal(.badRequest, "more than one \(name.rawValue) header") }
        guard let value = try number(text, name.rawValue) else {
            throw GatewayRefusal(.badRequest, "the \(name.rawValue) header is 2^63 or more")
        }
        return value
    }

    /// `text` as a number of bytes: `nil` when it is 2^63 or more; refused (400) unless it is decimal
    /// digits (with spaces or tabs around them).
    package static func number(_ text: String, _ name: String) throws(GatewayRefusal) -> Int64? {
        let digits = ByteRangeRequest.trimmed(Array(text.utf8))
        guard !digits.isEmpty, digits.allSatisfy(ByteRangeRequest.isDigit) else {
            throw GatewayRefusal(.badRequest, "the \(name) header is not a number of bytes (decimal digits only)")
        }
        return ByteRangeRequest.value(digits)
    }

    /// The line of the one answer (404) to a blob the caller's group may not read: unknown, another
    /// group's, incomplete, or named by no current manifest row of the group.
    package static let unknownBlobLine = "no such blob in this group"

    /// The one line a typed refusal of a chunk carries (``GatewayHeader/refusal``): what was refused
    /// and the limit; `nil` for an outcome that is not a refusal.
    package static func line(_ outcome: BlobPutOutcome) -> String? {
        switch outcome {
        case .tooLarge(let limit): "too_large: the file is over this server's largest, \(describe(limit))"
        case .chunkTooLarge(let limit): "chunk_too_large: a chunk is at most \(describe(limit)); send the file in chunks of that size"
        case .quotaExceeded(let limit): "quota_exceeded: the group's files would take more than its quota on the server, \(describe(limit))"
        case .hashMismatch: "hash_mismatch: the blob's bytes do not hash to its name; the upload was dropped, start it again from 0"
        case .accepted, .complete, .offsetMismatch, .sizeMismatch: nil
        }
    }

    /// The status a chunk's outcome is answered with (the device reads it back: ``BlobPutOutcome``).
    package static func status(_ outcome: BlobPutOutcome) -> GatewayStatus {
        switch outcome {
        case .accepted, .complete: .ok
        case .offsetMismatch, .sizeMismatch: .conflict
        case .tooLarge, .chunkTooLarge: .payloadTooLarge
        case .quotaExceeded: .insufficientStorage
        case .hashMismatch: .unprocessableContent
        }
    }

    /// `67108864 bytes (64 MiB)`, `1000 bytes`: the exact figure, and its unit when it is a whole one.
    static func describe(_ bytes: Int64) -> String {
        for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] where bytes >= Int64(1) << shift && bytes % (Int64(1) << shift) == 0 {
            return "\(bytes) bytes (\(bytes >> shift) \(unit))"
        }
        return "\(bytes) bytes"
    }
}

/// One byte range of a `GET` (RFC 9110 §14.1.2): `bytes=A-B`, `bytes=A-` (from `A` to the end) or
/// `bytes=-N` (the last `N` bytes). Read strictly, and as the RFC reads it: the unit's case does not
/// matter, spaces around a range and empty list elements are allowed, a position of 2^63 or more
/// is taken as the largest (a first one past any blob's end: 416; a last one clipped to the end).
/// Several ranges, a last position before the first, or anything else is refused in one line (400).
package enum ByteRangeRequest: Equatable, Sendable {
    /// `bytes=FIRST-LAST` (`LAST` `nil`: to the end).
    case from(Int64, through: Int64?)
    /// `bytes=-N`: the last `N` bytes.
    case suffix(Int64)

    /// Reads a `Range` header's value: `nil` for a range unit other than `bytes`, which RFC 9110 §14.2
    /// says a server ignores (the whole blob is sent).
    package init?(parsing text: String) throws(GatewayRefusal) {
        let bytes = Self.trimmed(Array(text.utf8))
        let malformed = GatewayRefusal(.badRequest, "the Range header is not one byte range (bytes=FIRST-LAST, bytes=FIRST- or bytes=-LENGTH)")
        guard let equals = bytes.firstIndex(of: UInt8(ascii: "=")) else { throw malformed }
        let unit = bytes[..<equals]
        guard !unit.isEmpty, unit.allSatisfy(Self.isTokenCharacter) else { throw malformed }
        guard String(decoding: unit, as: UTF8.self).lowercased() == "bytes" else { return nil }
        let specs = bytes[(equals + 1)...].split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false)
            .map { Self.trimmed(Array($0)) }.filter { !$0.isEmpty }
        guard !specs.isEmpty else { throw malformed }
        guard specs.count == 1 else {
            throw GatewayRefusal(.badRequest, "the Range header asks for \(specs.count) ranges: a blob is served one range at a time")
        }
        let spec = specs[0]
        guard let dash = spec.firstIndex(of: UInt8(ascii: "-")) else { throw malformed }
        let first = spec[..<dash], last = spec[(dash + 1)...]
        guard first.allSatisfy(Self.isDigit), last.allSatisfy(Self.isDigit), !(first.isEmpty && last.isEmpty) else { throw malformed }
        if first.isEmpty {
            self = .suffix(Self.value(Array(last)) ?? .max)
            return
        }
        let start = Self.value(Array(first)) ?? .max
        let end: Int64? = last.isEmpty ? nil : Self.value(Array(last)) ?? .max
        if let end, end < start {
            throw GatewayRefusal(.badRequest, "the Range header's last byte is before its first")
        }
        self = .from(start, through: end)
    }

    /// The bytes `[first, last]` of a blob of `size` bytes it asks for, or `nil` when it asks for none
    /// of them (a first byte at or past the end, the last 0 bytes, any range of an empty blob): 416.
    package func resolved(size: Int64) -> ClosedRange<Int64>? {
        guard size > 0 else { return nil }
        switch self {
        case .from(let first, let last):
            guard first < size else { return nil }
            return first...min(last ?? size - 1, size - 1)
        case .suffix(let length):
            guard length > 0 else { return nil }
            return (size - min(length, size))...(size - 1)
        }
    }

    /// The header's value: `bytes=FIRST-LAST`, `bytes=FIRST-`, `bytes=-LENGTH`.
    package var text: String {
        switch self {
        case .from(let first, let last): "bytes=\(first)-\(last.map { String($0) } ?? "")"
        case .suffix(let length): "bytes=-\(length)"
        }
    }

    /// A 206's `Content-Range`: `bytes FIRST-LAST/SIZE`.
    package static func contentRange(_ range: ClosedRange<Int64>, size: Int64) -> String {
        "bytes \(range.lowerBound)-\(range.upperBound)/\(size)"
    }

    /// A 416's `Content-Range`: `bytes */SIZE`.
    package static func unsatisfied(size: Int64) -> String { "bytes */\(size)" }

    /// Reads a `Content-Range` (the client's side): the range (`nil` for `bytes */SIZE`) and the size;
    /// `nil` for anything else, or a range that does not fit in the size.
    package static func parseContentRange(_ text: String) -> (range: ClosedRange<Int64>?, size: Int64)? {
        let bytes = trimmed(Array(text.utf8))
        let prefix = Array("bytes ".utf8)
        guard bytes.count > prefix.count, Array(bytes.prefix(prefix.count)) == prefix,
              let slash = bytes.lastIndex(of: UInt8(ascii: "/")) else { return nil }
        let rest = bytes[prefix.count..<slash], sizeDigits = Array(bytes[(slash + 1)...])
        guard !sizeDigits.isEmpty, sizeDigits.allSatisfy(isDigit), let size = value(sizeDigits) else { return nil }
        if Array(rest) == [UInt8(ascii: "*")] { return (nil, size) }
        guard let dash = rest.firstIndex(of: UInt8(ascii: "-")) else { return nil }
        let first = Array(rest[..<dash]), last = Array(rest[(dash + 1)...])
        guard !first.isEmpty, !last.isEmpty, first.allSatisfy(isDigit), last.allSatisfy(isDigit),
              let start = value(first), let end = value(last), start <= end, end < size else { return nil }
        return (start...end, size)
    }

    static func isDigit(_ byte: UInt8) -> Bool { byte >= 0x30 && byte <= 0x39 }

    /// RFC 9110's `tchar`: what a range unit (a token) is made of.
    static func isTokenCharacter(_ byte: UInt8) -> Bool {
        isDigit(byte) || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
    }

    /// Without the spaces and tabs (HTTP's OWS) at either end.
    static func trimmed(_ bytes: [UInt8]) -> [UInt8] {
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 }
        guard let start = bytes.firstIndex(where: { !isSpace($0) }), let end = bytes.lastIndex(where: { !isSpace($0) }) else { return [] }
        return Array(bytes[start...end])
    }

    /// Decimal digits' value, `nil` when it is 2^63 or more (leading zeros count for nothing).
    static func value(_ digits: [UInt8]) -> Int64? {
        var value: Int64 = 0
        for digit in digits {
            let (times, overflowTimes) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowSum) = times.addingReportingOverflow(Int64(digit - 0x30))
            guard !overflowTimes, !overflowSum else { return nil }
            value = sum
        }
        return value
    }
}
