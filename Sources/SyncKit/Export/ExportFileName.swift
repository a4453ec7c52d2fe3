import KVStore
#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

/// A file-name pattern for exports: a prefix, a `YYYYMMDD_hhmmss` stamp and an extension, as in
/// `subscriptions_export_20260206_123456.json`.
///
/// ```swift
/// let pattern = ExportFileName(prefix: "subscriptions_export_", pathExtension: "json")
/// try pattern.name(at: now, format: ExportTimeFormat(timeZone: tokyo))
/// // "subscriptions_export_20260206_123456.json"
/// pattern.matches("subscriptions_export_20260206_123456.json")   // true
/// ```
///
/// The stamp is in the format's time zone (``ExportTimeFormat/fileNameTimestamp(_:)``), to the second:
/// two exports within one second get the same name, and the later one replaces the earlier.
public struct ExportFileName: Sendable, Hashable {
    /// What comes before the stamp, such as `subscriptions_export_`.
    public var prefix: String
    /// The extension, without the dot, such as `json`.
    public var pathExtension: String

    public init(prefix: String, pathExtension: String) {
        self.prefix = prefix
        self.pathExtension = pathExtension
    }

    /// The file name for an export taken at `date`.
    ///
    /// - Throws: ``ExportError/invalidFileName(_:reason:)`` when the prefix or extension would make it
    ///   something other than one plain file name; ``ExportError/dateOutOfRange(_:)``.
    public func name(at date: Date, format: ExportTimeFormat) throws(ExportError) -> String {
        let name = prefix + (try format.fileNameTimestamp(date)) + "." + pathExtension
        try Self.check(name)
        return name
    }

    /// Whether `name` follows the pattern: the prefix, eight digits, `_`, six digits, `.` and the
    /// extension.
    public func matches(_ name: String) -> Bool {
        let suffix = "." + pathExtension
        guard name.hasPrefix(prefix), name.hasSuffix(suffix),
              name.utf8.count == prefix.utf8.count + 15 + suffix.utf8.count else { return false }
        let stamp = Array(name.utf8.dropFirst(prefix.utf8.count).prefix(15))
        return stamp.enumerated().allSatisfy { i, byte in
            i == 8 ? byte == UInt8(ascii: "_") : (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
        }
    }

    /// Checks that `name` is one plain file name: not empty, not `.` or `..`, no `/`, no NUL or other
    /// control character, not hidden, at most 255 bytes.
    ///
    /// - Throws: ``ExportError/invalidFileName(_:reason:)`` naming the rule.
    public static func check(_ name: String) throws(ExportError) {
        if name.isEmpty { throw .invalidFileName(name, reason: "the name is empty") }
        // Bytes, not Characters: "/\u{301}" (a slash and a combining mark) is one Character, which
        // contains("/") and hasPrefix(".") do not see, but the kernel does.
        if name.utf8.contains(UInt8(ascii: "/")) { throw .invalidFileName(name, reason: "a file name cannot contain '/'") }
        if name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            throw .invalidFileName(name, reason: "a file name cannot contain control characters")
        }
        if name.utf8.first == UInt8(ascii: ".") { throw .invalidFileName(name, reason: "a file name cannot start with '.'") }
        if name.utf8.count > 255 {
            throw .invalidFileName(name, reason: "the name is \(name.utf8.count) bytes; the limit is 255")
        }
    }
}
