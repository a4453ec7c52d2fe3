import Foundation
import KVStore

/// One entry of a dump as read, before validation: the raw bytes (`k`, `v`) when present, or else
/// the rendered JSON (`key`, `value`) of a hand-written line.
struct RawDumpLine: Sendable {
    var line: Int
    var database: String
    var key: [UInt8]?
    var value: [UInt8]?
    var keyNode: JSONNode?
    var valueNode: JSONNode?
}
