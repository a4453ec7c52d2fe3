#if PostgreSQL
import Foundation
import Logging
import SyncWire

/// The database owner's view of the files' bytes the server keeps (issue 49): `kvtool sync blobs ls`
/// and `kvtool sync blobs gc`, on the direct path (as ``SyncTokens``' commands, the owner's session
/// migrates first).
///
/// ```swift
/// let doomed = try await SyncServerBlobs.collect(on: ServerURL("postgres://owner@db/kv"), dryRun: true)
/// ```
package enum SyncServerBlobs {
    /// How long an upload may go untouched before a collection removes it: a day.
    package static let defaultUploadingGrace: Duration = .seconds(86_400)
    /// How long a complete blob that no manifest row names is kept after it was completed or last
    /// referenced by a push: a week.
    package static let defaultUnreferencedGrace: Duration = .seconds(7 * 86_400)
    /// The most blobs one listing holds.
    package static let maxListed = 100_000

    /// The blobs of `group` (every group's when `nil`), in group and hash order, at most ``maxListed``.
    package static func list(on owner: ServerURL, group: String?, logger: Logger = SyncTokens.quietLogger) async throws
        -> [ServerStatements.ListedBlob] {
        try await SyncTokens.withOwner(owner, logger: logger) { connection in
            try await ServerStatements.blobList(group: group, limit: maxListed, on: connection, logger: logger)
        }
    }

    /// Removes (with `dryRun`, lists) what `kvsync_blob_gc` collects: uploads untouched for
    /// `uploadingGrace`, complete blobs no current manifest row names and no push referenced for
    /// `unreferencedGrace`; every group's.
    package static func collect(on owner: ServerURL, uploadingGrace: Duration = defaultUploadingGrace,
                                unreferencedGrace: Duration = defaultUnreferencedGrace, dryRun: Bool,
                                logger: Logger = SyncTokens.quietLogger) async throws -> [ServerStatements.CollectedBlob] {
        try await SyncTokens.withOwner(owner, logger: logger) { connection in
            try await ServerStatements.blobGC(uploadingGrace: uploadingGrace, unreferencedGrace: unreferencedGrace, dryRun: dryRun,
                                              on: connection, logger: logger)
        }
    }
}
#endif
