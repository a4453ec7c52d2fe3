internal import CLMDB
#if canImport(Glibc)
import Glibc
#endif

/// An error code returned by LMDB.
///
/// Every `mdb_*` call in KVStore goes through ``check(_:)``, so no return code is ever dropped.
/// Match a specific code with `catch`:
///
/// ```swift
/// do { try store.write { … } }
/// catch LMDBError.readersFull { … }
/// ```
///
/// Codes from LMDB's own range (`MDB_KEYEXIST` … `MDB_BAD_DBI`) have named constants; anything else is
/// an `errno` value from the operating system (`ENOSPC`, `EIO`, `EACCES`, …).
public struct LMDBError: Error, RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The C return code.
    public let rawValue: Int32

    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The corresponding LMDB constant is `MDB_KEYEXIST`.
    public static let keyExists = LMDBError(rawValue: MDB_KEYEXIST)
    /// The corresponding LMDB constant is `MDB_NOTFOUND`.
    public static let notFound = LMDBError(rawValue: MDB_NOTFOUND)
    /// The corresponding LMDB constant is `MDB_PAGE_NOTFOUND`.
    public static let pageNotFound = LMDBError(rawValue: MDB_PAGE_NOTFOUND)
    /// The corresponding LMDB constant is `MDB_CORRUPTED`.
    public static let corrupted = LMDBError(rawValue: MDB_CORRUPTED)
    /// The corresponding LMDB constant is `MDB_PANIC`.
    public static let panic = LMDBError(rawValue: MDB_PANIC)
    /// The corresponding LMDB constant is `MDB_VERSION_MISMATCH`.
    public static let versionMismatch = LMDBError(rawValue: MDB_VERSION_MISMATCH)
    /// The corresponding LMDB constant is `MDB_INVALID`.
    public static let invalid = LMDBError(rawValue: MDB_INVALID)
    /// The corresponding LMDB constant is `MDB_MAP_FULL`. KVStore grows the map and retries; you see it only
    /// when the map would pass ``Store/Options/maxMapSize``.
    public static let mapFull = LMDBError(rawValue: MDB_MAP_FULL)
    /// The corresponding LMDB constant is `MDB_DBS_FULL`.
    public static let databasesFull = LMDBError(rawValue: MDB_DBS_FULL)
    /// The corresponding LMDB constant is `MDB_READERS_FULL`.
    public static let readersFull = LMDBError(rawValue: MDB_READERS_FULL)
    /// The corresponding LMDB constant is `MDB_TLS_FULL`.
    public static let tlsFull = LMDBError(rawValue: MDB_TLS_FULL)
    /// The corresponding LMDB constant is `MDB_TXN_FULL`.
    public static let transactionFull = LMDBError(rawValue: MDB_TXN_FULL)
    /// The corresponding LMDB constant is `MDB_CURSOR_FULL`.
    public static let cursorFull = LMDBError(rawValue: MDB_CURSOR_FULL)
    /// The corresponding LMDB constant is `MDB_PAGE_FULL`.
    public static let pageFull = LMDBError(rawValue: MDB_PAGE_FULL)
    /// The corresponding LMDB constant is `MDB_MAP_RESIZED`. KVStore adopts the new size and retries.
    public static let mapResized = LMDBError(rawValue: MDB_MAP_RESIZED)
    /// The corresponding LMDB constant is `MDB_INCOMPATIBLE`.
    public static let incompatible = LMDBError(rawValue: MDB_INCOMPATIBLE)
    /// The corresponding LMDB constant is `MDB_BAD_RSLOT`.
    public static let badReaderSlot = LMDBError(rawValue: MDB_BAD_RSLOT)
    /// The corresponding LMDB constant is `MDB_BAD_TXN`.
    public static let badTransaction = LMDBError(rawValue: MDB_BAD_TXN)
    /// The corresponding LMDB constant is `MDB_BAD_VALSIZE`: a key that is empty or longer than 511 bytes.
    public static let badValueSize = LMDBError(rawValue: MDB_BAD_VALSIZE)
    /// The corresponding LMDB constant is `MDB_BAD_DBI`.
    public static let badDatabase = LMDBError(rawValue: MDB_BAD_DBI)

    /// The operating system's `ENOSPC`: the disk is full.
    public static let noSpace = LMDBError(rawValue: ENOSPC)
    /// The operating system's `EIO`.
    public static let ioError = LMDBError(rawValue: EIO)
    /// The operating system's `EACCES`.
    public static let accessDenied = LMDBError(rawValue: EACCES)
    /// The operating system's `ENOMEM`.
    public static let outOfMemory = LMDBError(rawValue: ENOMEM)
    /// The operating system's `EINVAL`.
    public static let invalidArgument = LMDBError(rawValue: EINVAL)

    /// `mdb_strerror`'s text for the code, with the C constant's name where LMDB has one.
    public var description: String {
        let text = String(cString: mdb_strerror(rawValue))
        if let name { return "\(name): \(text)" }
        return text
    }

    /// The C name of an LMDB code (`"MDB_MAP_FULL"`), or `nil` for an `errno` value.
    public var name: String? {
        switch rawValue {
        case MDB_KEYEXIST: "MDB_KEYEXIST"
        case MDB_NOTFOUND: "MDB_NOTFOUND"
        case MDB_PAGE_NOTFOUND: "MDB_PAGE_NOTFOUND"
        case MDB_CORRUPTED: "MDB_CORRUPTED"
        case MDB_PANIC: "MDB_PANIC"
        case MDB_VERSION_MISMATCH: "MDB_VERSION_MISMATCH"
        case MDB_INVALID: "MDB_INVALID"
        case MDB_MAP_FULL: "MDB_MAP_FULL"
        case MDB_DBS_FULL: "MDB_DBS_FULL"
        case MDB_READERS_FULL: "MDB_READERS_FULL"
        case MDB_TLS_FULL: "MDB_TLS_FULL"
        case MDB_TXN_FULL: "MDB_TXN_FULL"
        case MDB_CURSOR_FULL: "MDB_CURSOR_FULL"
        case MDB_PAGE_FULL: "MDB_PAGE_FULL"
        case MDB_MAP_RESIZED: "MDB_MAP_RESIZED"
        case MDB_INCOMPATIBLE: "MDB_INCOMPATIBLE"
        case MDB_BAD_RSLOT: "MDB_BAD_RSLOT"
        case MDB_BAD_TXN: "MDB_BAD_TXN"
        case MDB_BAD_VALSIZE: "MDB_BAD_VALSIZE"
        case MDB_BAD_DBI: "MDB_BAD_DBI"
        default: nil
        }
    }

    /// Throws the code as an `LMDBError` unless it is `MDB_SUCCESS`. The one place KVStore checks
    /// LMDB's return codes.
    @inline(__always)
    static func check(_ rc: Int32) throws(LMDBError) {
        if rc != MDB_SUCCESS { throw LMDBError(rawValue: rc) }
    }

    /// Lets `catch LMDBError.mapFull` match an error thrown as `any Error`.
    public static func ~= (lhs: LMDBError, rhs: any Error) -> Bool {
        (rhs as? LMDBError) == lhs
    }
}
