/// What ends each line of a CSV file.
///
/// RFC 4180 (§2, rule 1) specifies CRLF, which spreadsheet programs and Python's `csv` module expect
/// and which is therefore the default of ``CSVWriter``. Line breaks inside a quoted field are written
/// as they are in the value, whatever the line ending.
///
/// ```swift
/// let writer = CSVWriter(columns: columns, lineEnding: .lf)   // for Unix tools that want "\n"
/// ```
public enum CSVLineEnding: String, Sendable, Hashable, CaseIterable {
    /// `"\r\n"`, as RFC 4180 specifies. The default.
    case crlf = "\r\n"
    /// `"\n"`.
    case lf = "\n"
}
