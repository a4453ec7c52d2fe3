import Foundation
import KVStore

/// One validated entry: bytes ready to put.
struct DumpEntry: Hashable, Sendable {
    var database: String
    var key: [UInt8]
    var value: [UInt8]
    var line: Int
}
