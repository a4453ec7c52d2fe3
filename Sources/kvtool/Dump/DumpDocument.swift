import Foundation
import KVStore

/// A dump that passed every check that needs no target container.
struct DumpDocument: Sendable {
    var format: DumpInputFormat
    var header: DumpHeader
    var entries: [DumpEntry]
    /// The database of each name the header lists.
    var roles: [String: DumpDatabaseRole]
}
