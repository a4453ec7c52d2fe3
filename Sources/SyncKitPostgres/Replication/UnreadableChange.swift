#if PostgreSQL
import KVStore
import SyncKit

/// A change's key or value that this device cannot read (a value from a newer version of the app, a
/// key of another type): thrown before anything of the change is written, so the replicator can
/// quarantine the change and go on in the same transaction.
struct UnreadableChange: Error, CustomStringConvertible {
    let reason: String

    init(_ error: any Error) {
        reason = (error as? UnreadableChange)?.reason ?? "\(error)"
    }

    var description: String { reason }

    /// Runs `body`, which must write nothing, and turns what it throws into an ``UnreadableChange``.
    static func reading<R>(_ body: () throws -> R) throws -> R {
        do { return try body() } catch { throw UnreadableChange(error) }
    }
}
#endif
