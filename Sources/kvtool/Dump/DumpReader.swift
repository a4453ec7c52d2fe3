import Foundation
import KVStore

// The pure parser behind `kvtool load`: bytes in, a validated ``DumpDocument`` or a ``CLIError``
// naming the line out. It never traps on any input (no force unwraps, no unchecked conversions,
// bounded recursion), because it reads files from anywhere. The model of a dump (``DumpDocument``,
// ``DumpHeader``, ``DumpEntry``…) is shared by its three readable syntaxes (JSON Lines, JSON and
// LMDB's `mdb_dump` text).

/// Reads a dump in any of the syntaxes `load` accepts: the entry point of the pure parser.
enum DumpReader {
    /// Checks the caps, detects the syntax, parses and validates.
    ///
    /// - Throws: a ``CLIError`` of kind `badInput` naming the line at fault.
    /// - Parameter progress: called as entries are validated, with the count so far and the total.
    static func read(_ bytes: [UInt8], limits: DumpLimits = .default, partial: Bool = false,
                     progress: (_ done: Int, _ total: Int) -> Void = { _, _ in }) throws -> DumpDocument {
        guard bytes.count <= limits.maxInputBytes else {
            throw CLIError(.badInput, "the input is over the \(limits.maxInputBytes)-byte limit of a dump")
        }
        let lines = try lineRanges(bytes, maxLineBytes: limits.maxLineBytes)
        guard let first = lines.first, !bytes.isEmpty else {
            throw DumpError.at(1, "the input is empty; expected a kvtool dump")
        }
        let validator = DumpValidator(limits: limits, partial: partial)
        switch try detect(bytes, firstLine: first) {
        case .mdb:
            let (header, raw, end) = try DumpMDB.read(bytes, lines: lines)
            return try validator.validate(format: .mdb, header: header, lines: raw, endLine: end, progress: progress)
        case .json:
            let (header, raw, end) = try DumpJSON.readDocument(bytes)
            return try validator.validate(format: .json, header: header, lines: raw, endLine: end, progress: progress)
        case .jsonLines:
            let (header, raw, end) = try DumpJSON.readLines(bytes, lines: lines)
            return try validator.validate(format: .jsonLines, header: header, lines: raw, endLine: end, progress: progress)
        }
    }

    /// The byte ranges of the lines (without their `\n`); a last line without `\n` counts.
    static func lineRanges(_ bytes: [UInt8], maxLineBytes: Int) throws -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        var start = 0
        try bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return }
            while start < buffer.count, let found = memchr(base + start, 0x0A, buffer.count - start) {
                let end = UnsafeRawPointer(base).distance(to: UnsafeRawPointer(found))
                guard end - start <= maxLineBytes else {
                    throw DumpError.at(ranges.count + 1, "the line is over the \(maxLineBytes)-byte limit")
                }
                ranges.append(start..<end)
                start = end + 1
            }
        }
        if start < bytes.count {
            guard bytes.count - start <= maxLineBytes else {
                throw DumpError.at(ranges.count + 1, "the line is over the \(maxLineBytes)-byte limit")
            }
            ranges.append(start..<bytes.count)
        }
        return ranges
    }

    private static func detect(_ bytes: [UInt8], firstLine: Range<Int>) throws -> DumpInputFormat {
        if bytes.starts(with: Array("VERSION=".utf8)) { return .mdb }
        let line = bytes[firstLine]
        var index = line.startIndex
        while index < line.endIndex, [0x20, 0x09, 0x0D].contains(line[index]) { index += 1 }
        if index < line.endIndex, line[index] == UInt8(ascii: "{") {
            // A JSON dump's first member is "header" (or "entries"); a JSON Lines header's is not.
            var next = bytes.index(after: index)
            while next < bytes.count, [0x20, 0x09, 0x0D, 0x0A].contains(bytes[next]) { next += 1 }
            let rest = bytes[next..<min(bytes.count, next + 10)]
            if rest.starts(with: Array("\"header\"".utf8)) || rest.starts(with: Array("\"entries\"".utf8)) { return .json }
            return .jsonLines
        }
        if String(validating: line, as: UTF8.self) == nil || line.contains(where: { $0 < 0x20 && $0 != 0x09 && $0 != 0x0D }) {
            throw DumpError.at(1, "not a kvtool dump: binary data, not text")
        }
        if line.starts(with: Array("key,".utf8)) || Array(line) == Array("key".utf8) || Array(line) == Array("key\r".utf8) {
            throw DumpError.at(1, "this looks like a CSV dump, which load does not read: use a JSON Lines, JSON or mdb dump")
        }
        throw DumpError.at(1, "not a kvtool dump: expected a JSON Lines or JSON header, or an mdb_dump VERSION=3 line")
    }
}
