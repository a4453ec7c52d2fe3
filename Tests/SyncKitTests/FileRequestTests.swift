import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport
import Workloads
#if canImport(Glibc)
import Glibc
#endif

/// A file asked for from any process (issue 49), the lean side alone: the wish in the container's
/// mailbox (`_files.wanted`), the request that wakes the owner, the wait with its deadline. The owner
/// here is a thread of the test that does what a replicator's round does once it has the bytes (the
/// round itself is ReplicatedFilesSyncTests').
@Suite struct FileRequestTests {
    @Test(.blockingWork) func aFileAskedForIsWaitedForUntilTheOwnerFetchesItOrReadsAsNotYetDownloadedAtTheDeadline() throws {
        let dir = TemporaryDirectory()
        let container = try dir.container()
        try FileManifest.declare(prefix: "img/", fetch: .lazy(budget: 1 << 20), in: container.store)
        let png = Array(TrainerNotificationFlow.samplePNG)
        let entry = try #require(try container.store.write { tx in try container.files.write(png, to: "img/a.png", in: tx) })
        let hex = SHA256Hasher.hex(Array(entry.sha256))
        // The row names bytes this device does not hold (as after a pull of a lazy prefix).
        #expect(unlink(container.layout.blobs + "/" + hex) == 0 && unlink(container.layout.files + "/img/a.png") == 0)

        // No owner: the answer at the deadline is the typed one, and the wish stays for the owner.
        let clock = ContinuousClock()
        var start = clock.now
        #expect(throws: SharedFilesError.notYetDownloaded(path: "img/a.png", sha256: hex)) {
            try container.readFile("img/a.png", within: .milliseconds(200))
        }
        #expect(clock.now - start >= .milliseconds(200))
        let first = try #require(try container.files.wantedFiles()["img/a.png"])
        // An owner clears a wish only up to the time it read: a process that asked again since keeps it.
        #expect(try !container.files.clearWish("img/a.png", askedAt: first - 1))
        #expect(try container.files.wantedFiles()["img/a.png"] == first)

        // An owner woken by the request: it fetches the bytes (here from the test), publishes them as a
        // download does, clears the wish it read and posts the status.
        let notifier = ChangeNotifier(container: container)
        let requests = try notifier.subscribe(SyncService.requestNotification)
        let served = Locked<Bool?>(nil)
        let done = DispatchSemaphore(value: 0)
        let owner = Thread {
            defer { done.signal() }
            guard requests.wait(timeout: .seconds(60)) else { served.withLock { $0 = false }; return }
            do {
                let wanted = try container.files.wantedFiles()
                let download = try container.files.beginDownload(of: hex)
                try download.append(png)
                try container.files.finishDownload(download, path: "img/a.png", entry: entry)
                for (path, asked) in wanted { try container.files.clearWish(path, askedAt: asked) }
                try notifier.post(SyncService.statusNotification)
                served.withLock { $0 = true }
            } catch {
                served.withLock { $0 = false }
            }
        }
        owner.start()
        start = clock.now
        #expect(try container.readFile("img/a.png", within: .seconds(60)) == Data(png))
        print("FileRequestTests: asked and served in \((clock.now - start).formatted(.units(allowed: [.milliseconds])))")
        #expect(done.wait(timeout: .now() + 60) == .success)
        #expect(served.withLock { $0 } == true)
        #expect(try container.files.wantedFiles().isEmpty)
        #expect(try container.files.localState(for: "img/a.png")?.state == .present)
        // Here now: read at once, nothing asked.
        #expect(try container.readFile("img/a.png", within: .zero) == Data(png))
        #expect(try container.files.wantedFiles().isEmpty)
        // A path no manifest row names is never waited for.
        #expect(throws: KVStoreError.fileNotFound(path: "img/none.png")) { try container.readFile("img/none.png", within: .seconds(60)) }
    }
}
