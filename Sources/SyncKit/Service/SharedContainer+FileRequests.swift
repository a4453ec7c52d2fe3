#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import KVStore

extension SharedContainer {
    /// The bytes of the replicated file at `path` (relative to `Files/`), asking the container's sync
    /// owner for them when they are not here yet, and waiting up to `timeout`, blocking the calling
    /// thread: what an extension that must show a file calls.
    ///
    /// ```swift
    /// let image = try container.readFile("TrainerImages/\(id).png", within: .seconds(2))
    /// ```
    ///
    /// A file that is here is read at once (``KVStore/SharedFiles/readVerified(_:maxSize:)``: exactly
    /// the bytes its manifest row names). One that is not (``KVStore/SharedFilesError/notYetDownloaded(path:sha256:)``)
    /// is asked for: the wish is recorded in the store's mailbox (``KVStore/SharedFiles/requestDownload(_:now:)``,
    /// one transaction) and the owner is woken (``SyncService/requestNotification``, as
    /// ``SyncService/request(within:startingAgent:)`` wakes it); the owner's round fetches the bytes,
    /// checks their hash, renames them into place, clears the wish and posts
    /// ``SyncService/statusNotification``, which ends the wait (a short bound notices bytes another way).
    /// At the deadline the answer is `notYetDownloaded`, never a part of the file; the wish stays, and
    /// the owner fetches the file for the next read. This links no networking.
    ///
    /// - Throws: ``KVStore/SharedFilesError/notYetDownloaded(path:sha256:)`` when the bytes are not here
    ///   by the deadline; ``KVStore/KVStoreError/readOnly(path:)`` when they are not here and the
    ///   container was opened read-only (a wish is a write); otherwise what
    ///   ``KVStore/SharedFiles/readVerified(_:maxSize:)`` throws (a path with no manifest row reads as a
    ///   plain file, and is never waited for).
    public func readFile(_ path: String, within timeout: Duration, maxSize: Int = 64 << 20) throws -> Data {
        do {
            return try files.readVerified(path, maxSize: maxSize)
        } catch SharedFilesError.notYetDownloaded {}
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        let notifier = ChangeNotifier(container: self)
        // Observed before the wish is recorded: the owner's post after it fetched cannot be missed.
        let updates = try notifier.subscribe(SyncService.statusNotification)
        try files.requestDownload(path)
        try notifier.post(SyncService.requestNotification)
        while true {
            do {
                return try files.readVerified(path, maxSize: maxSize)
            } catch SharedFilesError.notYetDownloaded(let missing, let sha256) {
                let now = clock.now
                guard now < deadline else { throw SharedFilesError.notYetDownloaded(path: missing, sha256: sha256) }
                _ = updates.wait(timeout: min(deadline - now, .milliseconds(50)))
            }
        }
    }
}
