import CLMDB

/// How hard a commit works to survive a crash of the machine (not of the process: a process crash
/// never loses a committed transaction in any mode, because the data is already in the OS page cache).
///
/// The mode is per process: one process may write with ``noSync`` while another writes durably.
/// Within one process, every handle on a store shares one LMDB environment, which commits in the
/// strongest mode any of them asked for (a ``durable`` handle opened after a ``noSync`` one makes
/// the other's commits durable too), so no handle commits less durably than it asked.
public enum Durability: String, Sendable, CaseIterable {
    /// The default. A commit that returned survives a power loss or kernel crash: LMDB `fsync`s the
    /// data pages and then the meta page before `commit` returns.
    case durable
    /// LMDB flushes data pages but not the meta page at commit (`MDB_NOMETASYNC`). A system crash can
    /// lose the last transaction(s), but never corrupts the store: the previous meta page is still
    /// valid. The corresponding LMDB constant is `MDB_NOMETASYNC`.
    case noMetaSync
    /// Commits do not flush at all (`MDB_NOSYNC`). A system crash can lose every transaction since the
    /// last ``Store/sync()``; with a file system that does not preserve write order it may also undo
    /// the last meta page and corrupt the store. Call ``Store/sync()`` at the points that must be
    /// durable. The corresponding LMDB constant is `MDB_NOSYNC`.
    case noSync

    var environmentFlags: UInt32 {
        switch self {
        case .durable: 0
        case .noMetaSync: UInt32(MDB_NOMETASYNC)
        case .noSync: UInt32(MDB_NOSYNC)
        }
    }
}
