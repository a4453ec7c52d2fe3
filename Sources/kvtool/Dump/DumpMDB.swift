import Foundation
import KVStore

// LMDB's own dump text, as `mdb_dump` (0.9.24) writes it and `mdb_load` reads it:
//
//     VERSION=3
//     format=bytevalue
//     database=c/scores
//     type=btree
//     mapsize=16777216
//     maxreaders=126
//     db_pagesize=4096
//     HEADER=END
//      616c696365        ← a space, then the key in hex
//      182a              ← a space, then the value in hex
//     DATA=END
//
// one section per named database. `format=print` writes printable bytes as they are and others as
// `\hh` (a backslash as `\\`). `dump --format mdb` writes exactly what `mdb_dump -a` does; `load`
// reads both formats.

enum DumpMDB {
    /// LMDB's per-database flags, in the order `mdb_dump` prints them (`dbflags[]` in mdb_dump.c).
    static let flagNames: [(bit: UInt32, name: String)] = [
        (0x02, "reversekey"), (0x04, "dupsort"), (0x08, "integerkey"),
        (0x10, "dupfixed"), (0x20, "integerdup"), (0x40, "reversedup"),
    ]
    static let dupSort: UInt32 = 0x04

    // MARK: - Writing

    /// The header of one section, up to and including `HEADER=END`.
    static func sectionHeader(database: String, flags: UInt32, figures: MDBHeaderFigures) -> String {
        var text = "VERSION=3\nformat=bytevalue\ndatabase=\(database)\ntype=btree\n"
        text += "mapsize=\(figures.mapSize)\nmaxreaders=\(figures.maxReaders)\n"
        if flags & dupSort != 0 { text += "duplicates=1\n" }
        for flag in flagNames where flags & flag.bit != 0 { text += "\(flag.name)=1\n" }
        text += "db_pagesize=\(figures.pageSize)\nHEADER=END\n"
        return text
    }

    /// One data line: a space, the bytes in lower-case hex, a newline.
    static func dataLine(_ bytes: UnsafeRawBufferPointer, into out: inout [UInt8]) {
        out.append(0x20)
        Hex.encode(bytes, into: &out)
        out.append(0x0A)
    }

    static let sectionEnd = "DATA=END\n"

    // MARK: - Reading

    private struct Section {
        var name: String?
        var print = false
        var line: Int
        var pairs: [(key: [UInt8], value: [UInt8], line: Int)] = []
    }

    /// Reads `mdb_dump` text: every section, its `_catalog` section giving the catalog.
    static func read(_ bytes: [UInt8], lines: [Range<Int>]) throws -> (DumpHeader, [RawDumpLine], endLine: Int) {
        enum State { case version, header, data, between }
        var state = State.version
        var sections: [Section] = []
        var current = Section(line: 1)
        var pendingKey: (bytes: [UInt8], line: Int)?

        for (i, range) in lines.enumerated() {
            let number = i + 1
            let line = bytes[range]
            let text = { String(decoding: line.prefix(80), as: UTF8.self) }
            switch state {
            case .version, .between:
                guard line.starts(with: Array("VERSION=".utf8)) else {
                    throw DumpError.at(number, state == .version
                        ? "not a kvtool dump: an mdb_dump section starts with VERSION=3"
                        : "expected VERSION=3 (the next section) after DATA=END")
                }
                guard Array(line) == Array("VERSION=3".utf8) else {
                    throw DumpError.at(number, "unsupported mdb_dump version \(JSONText.quoted(String(text().dropFirst(8)))); this kvtool reads VERSION=3")
                }
                current = Section(line: number)
                state = .header
            case .header:
                if Array(line) == Array("HEADER=END".utf8) {
                    state = .data
                    continue
                }
                if line.first == 0x20 {
                    throw DumpError.at(number, "missing HEADER=END: a data line comes before the header ends")
                }
                guard let equals = line.firstIndex(of: UInt8(ascii: "=")) else {
                    throw DumpError.at(number, "expected a header line (keyword=value) or HEADER=END, found \(JSONText.quoted(text()))")
                }
                let keyword = String(decoding: line[line.startIndex..<equals], as: UTF8.self)
                let value = Array(line[(equals + 1)...])
                let valueText = String(decoding: value.prefix(80), as: UTF8.self)
                switch keyword {
                case "VERSION":
                    throw DumpError.at(number, "missing HEADER=END and DATA=END before the next section")
                case "format":
                    switch valueText {
                    case "bytevalue": current.print = false
                    case "print": current.print = true
                    default: throw DumpError.at(number, "unknown mdb_dump format \(JSONText.quoted(valueText)) (expected bytevalue or print)")
                    }
                case "database":
                    guard !value.isEmpty, value.count <= Store.maxKeySize, !value.contains(0), let name = String(validating: value, as: UTF8.self) else {
                        throw DumpError.at(number, "a database name is 1 to \(Store.maxKeySize) bytes of UTF-8 without NUL")
                    }
                    current.name = name
                case "type":
                    guard valueText == "btree" else { throw DumpError.at(number, "unknown database type \(JSONText.quoted(valueText)) (expected btree)") }
                case "mapsize", "maxreaders", "db_pagesize":
                    guard !value.isEmpty, value.count <= 20, value.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
                        throw DumpError.at(number, "\(keyword) must be a decimal number")
                    }
                case "mapaddr":
                    break
                case "duplicates":
                    throw DumpError.at(number, "the database has duplicate keys (dupsort), which KVStore never creates and kvtool does not load")
                default:
                    if flagNames.contains(where: { $0.name == keyword }) {
                        throw DumpError.at(number, "the database has the LMDB flag \(keyword), which KVStore never sets and kvtool does not load")
                    }
                    throw DumpError.at(number, "unknown header keyword \(JSONText.quoted(String(keyword.prefix(80))))")
                }
            case .data:
                if Array(line) == Array("DATA=END".utf8) {
                    if let pendingKey { throw DumpError.at(pendingKey.line, "a key without a value before DATA=END") }
                    sections.append(current)
                    state = .between
                    continue
                }
                guard line.first == 0x20 else {
                    if line.starts(with: Array("VERSION=".utf8)) {
                        throw DumpError.at(number, "missing DATA=END before the next section")
                    }
                    throw DumpError.at(number, "expected a data line (a space, then the bytes) or DATA=END, found \(JSONText.quoted(text()))")
                }
                let content = line.dropFirst()
                let decoded: [UInt8]
                if current.print {
                    decoded = try decodePrint(content, line: number)
                } else {
                    guard content.count % 2 == 0 else { throw DumpError.at(number, "odd number of hex digits") }
                    guard let bytes = Hex.decode(content) else { throw DumpError.at(number, "not hex digits") }
                    decoded = bytes
                }
                if let key = pendingKey {
                    current.pairs.append((key.bytes, decoded, key.line))
                    pendingKey = nil
                } else {
                    pendingKey = (decoded, number)
                }
            }
        }
        let endLine = lines.count + 1
        switch state {
        case .version: throw DumpError.at(1, "the input is empty; expected a kvtool dump")
        case .header: throw DumpError.at(endLine, "the input ends before HEADER=END (truncated?)")
        case .data: throw DumpError.at(endLine, "the input ends before DATA=END (truncated?)")
        case .between: break
        }

        var header = DumpHeader()
        var raw: [RawDumpLine] = []
        var names = Set<String>()
        for section in sections {
            guard let name = section.name else {
                throw DumpError.at(section.line, "a section without database= is LMDB's main database, which kvtool does not load")
            }
            guard names.insert(name).inserted else { throw DumpError.at(section.line, "the database '\(name)' appears twice") }
            if name == DumpDatabaseRole.catalogDatabase {
                for pair in section.pairs {
                    header.catalog.append(try catalogEntry(key: pair.key, value: pair.value, line: pair.line))
                    header.catalogLines.append(pair.line)
                }
            } else {
                header.databases.append(DumpDatabase(name: name, entries: section.pairs.count))
                header.databaseLines.append(section.line)
                for pair in section.pairs {
                    raw.append(RawDumpLine(line: pair.line, database: name, key: pair.key, value: pair.value))
                }
            }
        }
        return (header, raw, endLine)
    }

    /// A `_catalog` entry: the key `c/<name>` or `d/<name>`, the CBOR of a ``CatalogEntry``.
    static func catalogEntry(key: [UInt8], value: [UInt8], line: Int) throws -> CatalogEntry {
        let entry: CatalogEntry
        do {
            entry = try CBORDecoder().decode(CatalogEntry.self, from: value)
        } catch {
            throw DumpError.at(line, "the catalog entry at key 0x\(Hex.encode(key.prefix(40))) does not decode: \(error)")
        }
        let expected = Array(((entry.kind == .collection ? "c/" : "d/") + entry.name).utf8)
        guard key == expected else {
            throw DumpError.at(line, "contradicting catalog entry: the key \(JSONText.quoted(String(decoding: key.prefix(80), as: UTF8.self))) holds the entry of \(entry.kind == .collection ? "collection" : "defaults suite") '\(entry.name)'")
        }
        return entry
    }

    /// `format=print` data: printable bytes as they are, `\\` for a backslash, `\hh` for any byte.
    static func decodePrint(_ content: ArraySlice<UInt8>, line: Int) throws -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(content.count)
        var index = content.startIndex
        while index < content.endIndex {
            let byte = content[index]
            guard byte == UInt8(ascii: "\\") else {
                out.append(byte)
                index += 1
                continue
            }
            guard content.endIndex - index >= 2 else { throw DumpError.at(line, "a backslash at the end of a print-format line") }
            if content[index + 1] == UInt8(ascii: "\\") {
                out.append(byte)
                index += 2
                continue
            }
            guard content.endIndex - index >= 3, let high = Hex.value(content[index + 1]), let low = Hex.value(content[index + 2]) else {
                throw DumpError.at(line, "a backslash must be followed by a backslash or two hex digits in print format")
            }
            out.append(high << 4 | low)
            index += 3
        }
        return out
    }
}
