#if Serve
/// Re-indents compact JSON text (two spaces a level), keeping every token as it was: the numbers'
/// spelling and the members' order, which a parse and re-serialisation would not.
enum PrettyJSON {
    static func format(_ compact: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(compact.utf8.count * 2)
        var depth = 0
        var inString = false
        var escaped = false
        let bytes = Array(compact.utf8)
        func newline() {
            out.append(UInt8(ascii: "\n"))
            out.append(contentsOf: repeatElement(UInt8(ascii: " "), count: 2 * depth))
        }
        for (index, byte) in bytes.enumerated() {
            if inString {
                out.append(byte)
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch byte {
            case UInt8(ascii: "\""):
                inString = true
                out.append(byte)
            case UInt8(ascii: "{"), UInt8(ascii: "["):
                out.append(byte)
                // An empty object or array stays on one line.
                let closing = byte == UInt8(ascii: "{") ? UInt8(ascii: "}") : UInt8(ascii: "]")
                if index + 1 < bytes.count, bytes[index + 1] == closing { continue }
                depth += 1
                newline()
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if index > 0, bytes[index - 1] != UInt8(ascii: "{"), bytes[index - 1] != UInt8(ascii: "[") {
                    depth = max(0, depth - 1)
                    newline()
                }
                out.append(byte)
            case UInt8(ascii: ","):
                out.append(byte)
                newline()
            case UInt8(ascii: ":"):
                out.append(contentsOf: [UInt8(ascii: ":"), UInt8(ascii: " ")])
            case UInt8(ascii: " "), UInt8(ascii: "\n"), UInt8(ascii: "\t"), UInt8(ascii: "\r"):
                continue
            default:
                out.append(byte)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
#endif
