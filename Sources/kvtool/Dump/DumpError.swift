import Foundation
import KVStore

/// The errors of reading a dump.
enum DumpError {
    /// A bad-input error naming the line. Control characters that came from the input (in a key or
    /// a database name) are escaped, so that the message stays one printable line.
    static func at(_ line: Int, _ message: String) -> CLIError {
        CLIError(.badInput, "line \(line): \(printable(message))")
    }

    static func printable(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else { return text }
        var out = ""
        for scalar in text.unicodeScalars {
            if scalar.value < 0x20 || scalar.value == 0x7F {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// A key for messages: rendered if it decodes, else hex; long ones shortened.
    static func describeKey(_ bytes: [UInt8], encoding: KeyEncoding?) -> String {
        if let encoding, let rendered = try? encoding.render(bytes) {
            let text = rendered.description
            return text.count > 80 ? String(text.prefix(77)) + "..." : text
        }
        let text = "0x" + Hex.encode(bytes.prefix(40))
        return bytes.count > 40 ? text + "..." : text
    }
}
