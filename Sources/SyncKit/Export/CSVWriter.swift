#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// Writes rows as CSV (RFC 4180): a header line, then one line per row, columns in a fixed order.
///
/// ```swift
/// let writer = CSVWriter<BillingEvent>(columns: [
///     CSVColumn("event_id") { $0.id.uuidString.lowercased() },
///     CSVColumn("billed_at") { $0.billedAt.description },
///     CSVColumn("memo") { $0.memo ?? "" },
/// ])
/// let text = try writer.render(events)
/// // event_id,billed_at,memo\r\n
/// // 7c0e…,2026-02-10,"a, b"\r\n
/// ```
///
/// Fields are quoted by ``CSVText/field(_:)``: only when they contain a comma, a double quote, CR or
/// LF, with quotes doubled. Every line, the last one and the header included, ends with
/// ``lineEnding`` (CRLF by default, as RFC 4180 specifies), so a file with no rows is the header line.
/// An absent value is an empty field: CSV cannot tell it from an empty string.
///
/// A writer is immutable and `Sendable`; its column closures must be safe to call from any thread.
public struct CSVWriter<Row>: Sendable {
    /// The columns, in the order they are written.
    public let columns: [CSVColumn<Row>]
    /// What ends each line.
    public let lineEnding: CSVLineEnding

    public init(columns: [CSVColumn<Row>], lineEnding: CSVLineEnding = .crlf) {
        self.columns = columns
        self.lineEnding = lineEnding
    }

    /// The headers, in column order.
    public var headers: [String] { columns.map(\.header) }

    /// The header line, with its line ending.
    public var headerLine: String { line(headers) }

    /// The line of one row, with its line ending.
    ///
    /// - Throws: whatever a column's `value` throws.
    public func line(for row: Row) throws -> String {
        line(try columns.map { try $0.value(row) })
    }

    /// The whole file: the header line, then one line per row in the order given.
    ///
    /// - Throws: whatever a column's `value` throws.
    public func render(_ rows: some Sequence<Row>) throws -> String {
        var out = headerLine
        for row in rows { out += try line(for: row) }
        return out
    }

    /// The bytes of ``render(_:)`` as UTF-8 (without a byte order mark).
    public func data(_ rows: some Sequence<Row>) throws -> Data {
        Data(try render(rows).utf8)
    }

    private func line(_ fields: [String]) -> String {
        fields.map(CSVText.field).joined(separator: ",") + lineEnding.rawValue
    }
}
