import Foundation
import KVStore

/// One named database listed in a dump's header, with its number of entries.
struct DumpDatabase: Hashable, Sendable {
    var name: String
    var entries: Int
}
