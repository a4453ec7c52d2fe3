internal import CLMDB

extension Durability {
    /// The environment flags of each mode.
    var environmentFlags: UInt32 {
        switch self {
        case .durable: 0
        case .noMetaSync: UInt32(MDB_NOMETASYNC)
        case .noSync: UInt32(MDB_NOSYNC)
        }
    }
}
