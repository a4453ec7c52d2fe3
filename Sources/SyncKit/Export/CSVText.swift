/// Field quoting for CSV (RFC 4180, §2 rules 5-7).
public enum CSVText {
    /// `field` as it goes into a CSV line: unchanged, unless it contains a comma, a double quote, a
    /// carriage return or a line feed; then it is enclosed in double quotes, with each double quote
    /// inside doubled.
    ///
    /// ```swift
    /// CSVText.field("Netflix")          // Netflix
    /// CSVText.field("a,b")              // "a,b"
    /// CSVText.field("say \"hi\"")       // "say ""hi"""
    /// CSVText.field("line 1\nline 2")   // "line 1\nline 2" (quoted, the line feed kept)
    /// ```
    ///
    /// Spaces are part of a field (RFC 4180) and do not cause quoting; an empty field stays empty.
    public static func field(_ field: String) -> String {
        let needsQuotes = field.unicodeScalars.contains { $0 == "," || $0 == "\"" || $0 == "\r" || $0 == "\n" }
        guard needsQuotes else { return field }
        var out = "\""
        out.unicodeScalars.reserveCapacity(field.unicodeScalars.count + 2)
        for scalar in field.unicodeScalars {
            if scalar == "\"" { out += "\"\"" } else { out.unicodeScalars.append(scalar) }
        }
        return out + "\""
    }
}
