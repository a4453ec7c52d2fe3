/// A read-only view of the store at one point in time: every read through it sees the same committed
/// state, whatever other threads and processes commit meanwhile.
///
/// You get one from ``Store/read(_:)``. It is valid only during the execution of that closure: do
/// not keep it, and do not use it from another thread. Bytes handed to you by `withValueBytes`
/// methods are valid only until the closure that received them returns.
public class ReadTransaction {
    @exclusivity(unchecked) private(set) var pointer: OpaquePointer
    /// The store this transaction belongs to.
    public unowned let store: Store
    // A transaction is used on one thread, inside its closure: these fields need no dynamic
    // exclusivity checks, which cost a few hundred instructions a read. (The store reference stays a
    // checked `unowned`: a transaction kept past its closure must trap, not read freed memory.)
    @exclusivity(unchecked) private(set) var isActive = true
    /// Collects what this transaction reads, while ``trackingReads(_:)`` runs.
    @exclusivity(unchecked) var readTracker: ReadTracker?
    /// Cursors opened in this transaction (``KVCursor``), closed when it ends.
    @exclusivity(unchecked) var cursors: [RangeCursor] = []

    init(pointer: OpaquePointer, store: Store) {
        self.pointer = pointer
        self.store = store
    }

    func end() {
        isActive = false
        closeCursors()
        readTracker = nil
    }

    /// Makes an ended transaction that nobody kept the view of a new LMDB transaction: what lets
    /// ``Store/read(_:)`` reuse the object rather than allocate one per read.
    func begin(pointer: OpaquePointer) {
        self.pointer = pointer
        isActive = true
    }

    @inline(__always)
    func checkActive() throws {
        if !isActive { throw KVStoreError.transactionEnded }
    }

}
