
/// An error raised while rendering or writing an export.
///
/// Each case's ``description`` is one line that names what is wrong and where, so that a tool can
/// print it as it is. Failures of the file system while writing come from KVStore as
/// `KVStoreError.io(operation:path:errno:)`.
///
/// ```swift
/// do { _ = try DecimalText.exact(.nan, path: "$.amount") }
/// catch { print(error) }   // the number at $.amount is NaN, which an export cannot represent
/// ```
public enum ExportError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A `Decimal` is NaN, which neither JSON nor CSV can represent. `path` says where (`$.amount`).
    case notANumber(path: String)
    /// An object has the same key twice. `path` is the object's path.
    case duplicateKey(String, path: String)
    /// A date or day falls outside the years 0000-9999, which ISO 8601's basic forms cover.
    case dateOutOfRange(String)
    /// An export file name is not a single, plain file name.
    case invalidFileName(String, reason: String)

    public var description: String {
        switch self {
        case .notANumber(let path):
            "the number at \(path) is NaN, which an export cannot represent"
        case .duplicateKey(let key, let path):
            "the object at \(path) has the key \(JSONText.quoted(key)) twice"
        case .dateOutOfRange(let what):
            "\(what) is outside the years 0000-9999 that an export can write"
        case .invalidFileName(let name, let reason):
            "invalid export file name \(Escaping.messageQuote(name)): \(reason)"
        }
    }
}
