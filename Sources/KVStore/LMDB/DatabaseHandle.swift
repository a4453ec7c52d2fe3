internal import CLMDB

/// The handle of one named LMDB database (LMDB's `MDB_dbi`), as the rest of KVStore holds it: an
/// opaque value that only `LMDB/` opens or unwraps. A handle is valid in every transaction that began
/// after it was opened (see ``Environment/database(named:create:)``).
struct DatabaseHandle: Hashable, Sendable {
    let dbi: MDB_dbi
}
