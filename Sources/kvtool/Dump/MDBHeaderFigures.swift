import Foundation
import KVStore

/// The environment figures an `mdb_dump` header shows.
struct MDBHeaderFigures: Sendable {
    var mapSize: Int
    var maxReaders: Int
    var pageSize: Int
}
