/// How hard a commit works to survive a crash of the machine (not of the process: a process crash
/// never loses a committed transaction in any mode, because the data is already in the OS page cache).
///
/// The mode is per process: one process may write with ``noSync`` while another writes durably.
/// Within one process, every handle on a store shares one LMDB environment, which commits in the
/// strongest mode any of them asked for (a ``durable`` handle opened after a ``noSync`` one makes
/// the other's commits durable too), so no handle commits less durably than it asked.
public enum Durability: String, Sendable, CaseIterable {
    /// The default. A commit that returned survives a power loss or kernel crash: LMDB `fdatasync`s
    /// the data pages, then writes the meta page through a descriptor opened `O_DSYNC`, before
    /// `commit` returns. Like every mode, it relies on the disk writing a 512-byte sector whole
    /// (LMDB's meta page has no checksum).
    case durable
    /// LMDB flushes data pages but not the meta page at commit (`MDB_NOMETASYNC`); the next commit's
    /// flush writes it. A system crash can lose the last acknowledged transaction, but never corrupts
    /// the store: the previous meta page is still valid. The corresponding LMDB constant is
    /// `MDB_NOMETASYNC`.
    case noMetaSync
    /// Commits do not flush at all (`MDB_NOSYNC`). A system crash can lose every transaction since the
    /// last ``Store/sync()``, and can also leave the store **corrupt** (opening or reading it fails,
    /// returns wrong data, or crashes the process inside LMDB) or silently rolled back to a state
    /// older than the last ``Store/sync()``: a later unflushed commit's meta page can reach the disk
    /// before the pages it points to. ``Store/sync()`` makes the commits before it durable only until
    /// the next `noSync` commit. Use it only for data that can be rebuilt. The corresponding LMDB
    /// constant is `MDB_NOSYNC`.
    case noSync
}
