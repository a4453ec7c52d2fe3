#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncWire

/// The figures of one ``Replicator/sync()`` round.
public struct SyncReport: Hashable, Sendable, Codable {
    /// This container's changes the server has that this container learned of in this round: each
    /// change is counted once, in the round that first records it. A change the server already had
    /// and this container had recorded (a batch sent again after a standby took over from an owner
    /// that died before acknowledging it) is not counted again; ``ReplicationStatus/pushed`` adds these
    /// up.
    public var pushed = 0
    /// Other devices' changes applied here.
    public var pulled = 0
    /// Conflicts resolved in this round.
    public var conflicts = 0
    /// Other devices' changes quarantined in this round (``QuarantinedChange``).
    public var quarantined = 0
    /// This device's writes the server refused in this round, each kept with its reason (``RejectedWrite``).
    public var rejected = 0
    /// Whether the round reloaded from the server's state.
    public var resynchronized = false
    /// The cursor after the round.
    public var cursor: Int64 = 0
    /// The keys whose local writes wait behind other devices' quarantined changes after the round
    /// (`nil`: none), in one line that names them: everything else went to the server.
    public var held: HeldKeys?
    /// Manifest rows of this container (``KVStore/FileManifestEntry``) that the server answered
    /// `missing_blob` in this round: their files' bytes are not on the server yet, and they stay
    /// pending until they are (issue 49).
    public var waitingForFiles = 0
    /// Files this round uploaded (their bytes complete on the server after it), and the bytes it sent
    /// for them: an upload that goes on after a process died sends only what the server did not have.
    public var filesUploaded = 0
    public var fileBytesSent: Int64 = 0

    public init() {}

    /// Adds `round`'s figures to these (the cursor becomes `round`'s).
    public mutating func add(_ round: SyncReport) {
        pushed += round.pushed
        pulled += round.pulled
        conflicts += round.conflicts
        quarantined += round.quarantined
        rejected += round.rejected
        resynchronized = resynchronized || round.resynchronized
        cursor = round.cursor
        held = round.held
        waitingForFiles = round.waitingForFiles
        filesUploaded += round.filesUploaded
        fileBytesSent += round.fileBytesSent
    }
}
#endif
