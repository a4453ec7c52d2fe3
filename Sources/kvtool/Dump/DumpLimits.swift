import Foundation
import KVStore

/// The caps on what `load` reads. A line (of any format) over `maxLineBytes`, or an input over
/// `maxInputBytes`, is rejected before anything else is looked at.
struct DumpLimits: Sendable {
    /// 64 MiB: enough for a 32 MiB value in hex (mdb format) or 48 MiB in base64 (JSON Lines).
    static let defaultMaxLineBytes = 64 << 20
    /// 1 GiB.
    static let defaultMaxInputBytes = 1 << 30
    /// Nesting of JSON arrays and objects: CBOR values nest at most 64 deep, plus the line's own.
    static let maxJSONDepth = 80

    var maxLineBytes = defaultMaxLineBytes
    var maxInputBytes = defaultMaxInputBytes

    static let `default` = DumpLimits()
}
