import Foundation
import KVStore

/// Printing helpers: aligned tables for people, JSON for scripts.
enum Output {
    /// Prints rows as columns padded to the widest cell (by character count).
    static func table(_ header: [String], _ rows: [[String]]) {
        let all = [header] + rows
        var widths = Array(repeating: 0, count: header.count)
        for row in all { for (i, cell) in row.enumerated() where i < widths.count { widths[i] = max(widths[i], cell.count) } }
        for row in all {
            let cells = row.enumerated().map { i, cell in
                i == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[i] - cell.count)
            }
            print(cells.joined(separator: "  "))
        }
    }

    /// Prints `value` on one line, each object's keys sorted: the `--json` output of commands that
    /// report on the store (`info`, `check`, `collections`, …).
    static func json(_ value: JSONValue) throws {
        print(try sorted.render(value))
    }

    /// `value` as one line of JSON, members in the order given and map keys that CBOR allowed to
    /// repeat kept: stored values, and lines whose order is part of their format.
    static func line(_ value: JSONValue) throws -> String {
        try JSONWriter.cborCompact.render(value)
    }

    private static let sorted = JSONWriter(layout: .compact, trailingNewline: false, sortsKeys: true)

    /// Flushes standard output, so that a reader of a pipe sees each line as it is printed.
    static func flush() {
        fflush(nil)
    }

    /// Reads `handle` to its end, refusing more than `limit` bytes; read errors become one-line errors
    /// rather than traps.
    static func readAll(_ handle: FileHandle, limit: Int, name: String, what: String) throws -> Data {
        var data = Data()
        do {
            while data.count <= limit {
                guard let chunk = try handle.read(upToCount: min(1 << 20, limit + 1 - data.count)), !chunk.isEmpty else { break }
                data.append(chunk)
            }
        } catch {
            let reason = ((error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError)?.localizedDescription ?? "\(error)"
            throw CLIError(.failure, "cannot read \(name): \(reason)")
        }
        guard data.count <= limit else { throw CLIError(.badInput, "\(name) is over the \(limit)-byte \(what) limit") }
        return data
    }

    /// Reads a whole value argument: `-` means standard input. At most `limit` bytes.
    static func readArgument(_ text: String, limit: Int = 16 << 20) throws -> String {
        guard text == "-" else {
            guard text.utf8.count <= limit else { throw CLIError(.badInput, "the value is over the \(limit)-byte input limit") }
            return text
        }
        let data = try readAll(FileHandle.standardInput, limit: limit, name: "standard input", what: "input")
        guard let string = String(data: data, encoding: .utf8) else { throw CLIError(.badInput, "standard input is not UTF-8") }
        return string
    }
}
