import Foundation
import KVStore

/// The syntaxes `load` reads (it detects which).
enum DumpInputFormat: String, Sendable {
    case jsonLines = "JSON Lines"
    case json = "JSON"
    case mdb = "mdb_dump"
}
