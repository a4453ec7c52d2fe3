/// One column of a CSV export: its header and how to get its text from a row.
///
/// ```swift
/// let billedAt = CSVColumn<BillingEvent>("billed_at") { $0.billedAt.description }
/// ```
///
/// The text is the field's raw value; ``CSVWriter`` quotes it as RFC 4180 requires. `value` may throw
/// (a NaN amount, for instance), which aborts the export with that error.
public struct CSVColumn<Row>: Sendable {
    /// The header, written as the first line's field for this column.
    public let header: String
    /// The field's raw text for a row.
    public let value: @Sendable (Row) throws -> String

    public init(_ header: String, value: @escaping @Sendable (Row) throws -> String) {
        self.header = header
        self.value = value
    }
}
