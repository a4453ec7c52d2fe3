import Foundation
import KVStore

/// The header of a dump: what it contains and the catalog that describes it.
struct DumpHeader: Sendable {
    static let formatName = "kvtool-dump"
    static let version = 1

    var version = DumpHeader.version
    /// The App Group the dump was taken from.
    var group: String?
    /// The LMDB transaction the dump was read in (`nil` for an mdb-format dump).
    var sourceTransactionID: Int?
    /// The catalog entries of the dumped collections and suites.
    var catalog: [CatalogEntry] = []
    /// The line each catalog entry is on.
    var catalogLines: [Int] = []
    /// Every dumped database, in the dump's order.
    var databases: [DumpDatabase] = []
    /// The line each database is listed on.
    var databaseLines: [Int] = []
    /// The line of the header (of the database list).
    var line = 1
}
