import Foundation
import Testing
import TestSupport
import KVStore
import SyncKit
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

private struct Feed: Codable, Equatable, Sendable {
    var value: Int
}

/// Atomically exchanges two paths (`renameat2(RENAME_EXCHANGE)`, which Swift's Glibc module does not
/// import), so a directory and a symbolic link trade places with no moment where either is missing.
private func exchange(_ a: String, _ b: String) -> Bool {
    typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
    guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "renameat2") else { return false }
    let renameat2 = unsafeBitCast(symbol, to: RenameAt2.self)
    return renameat2(AT_FDCWD, a, AT_FDCWD, b, 2 /* RENAME_EXCHANGE */) == 0
}

/// Symbolic links planted in `Snapshots/` and `Files/` (also swapped in while writers run), and the
/// permissions of everything a container creates.
@Suite struct ContainerSecurityTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.security"

    var containerPath: String { dir.path + "/" + group }

    /// A directory outside the container that nothing may ever write into.
    func outside() throws -> String {
        let path = dir.path + "/outside"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    func contents(_ path: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: path).sorted()
    }

    func populated() throws -> SharedContainer {
        let container = try SharedContainer(groupIdentifier: group, root: dir.path)
        try container.store.collection("scores", key: String.self, value: Int.self).put(1, forKey: "a")
        return container
    }

    @Test(.blockingWork) func aSnapshotsDirectoryReplacedByASymbolicLinkIsRefused() throws {
        let container = try populated()
        let outside = try outside()
        try FileManager.default.removeItem(atPath: container.snapshotsDirectory)
        try FileManager.default.createSymbolicLink(atPath: container.snapshotsDirectory, withDestinationPath: outside)
        #expect {
            _ = try Snapshots(container: container).export(from: container.store)
        } throws: { error in
            guard case KVStoreError.invalidPath(_, let reason) = error else { return false }
            return reason.contains("symbolic link")
        }
        #expect(throws: KVStoreError.self) { try WidgetFeed<Feed>(name: "today", container: container).publish(Feed(value: 1)) }
        #expect(try contents(outside).isEmpty)
    }

    @Test(.blockingWork) func aManifestOrASnapshotNamePlantedAsASymbolicLinkIsNeverFollowed() throws {
        let container = try populated()
        let outside = try outside()
        let snapshots = try Snapshots(container: container)
        try snapshots.export(from: container.store)

        // The manifest replaced by a link to a file outside: export refuses to read or replace it.
        let victim = outside + "/victim.json"
        try Data("untouched".utf8).write(to: URL(fileURLWithPath: victim))
        let manifest = container.snapshotsDirectory + "/" + Snapshots.manifestName
        let saved = try Data(contentsOf: URL(fileURLWithPath: manifest))
        try FileManager.default.removeItem(atPath: manifest)
        try FileManager.default.createSymbolicLink(atPath: manifest, withDestinationPath: victim)
        #expect(throws: KVStoreError.self) { try snapshots.export(from: container.store) }
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "untouched")
        try FileManager.default.removeItem(atPath: manifest)
        try saved.write(to: URL(fileURLWithPath: manifest))

        // The next generation's name taken by a link: the generation is skipped, the link left alone.
        let next = container.snapshotsDirectory + "/" + SnapshotEntry.fileName(forGeneration: 2)
        try FileManager.default.createSymbolicLink(atPath: next, withDestinationPath: outside + "/stolen.mdb")
        let entry = try snapshots.export(from: container.store)
        #expect(entry.generation == 3)
        #expect(try contents(outside) == ["victim.json"])
        // verify names the planted link; the real snapshots check out.
        let verification = try snapshots.verify()
        #expect(verification.checked.map(\.generation) == [1, 3])
        #expect(verification.problems.map(\.description) == ["snapshot-000002.mdb: not listed in the manifest"])
    }

    @Test(.blockingWork) func aDirectorySwappedForASymbolicLinkWhileFilesAreWrittenNeverLetsAWriteOut() throws {
        let container = try populated()
        let outside = try outside()
        let files = container.files
        try files.write(Data("x".utf8), to: "inbox/seed.txt")
        let inbox = files.directory + "/inbox"
        let link = files.directory + "/inbox.link"
        #expect(symlink(outside, link) == 0)

        // One thread swaps inbox/ for a link to `outside` and back, atomically, as fast as it can.
        let stop = Mutex(false)
        let swaps = Mutex(0)
        let swapper = Thread {
            while !stop.withLock({ $0 }) {
                if exchange(inbox, link) {
                    _ = exchange(inbox, link)
                    swaps.withLock { $0 += 1 }
                }
            }
        }
        swapper.start()
        var written = 0, refused = 0
        for i in 0 ..< 2_000 {
            do {
                try files.write(Data("\(i)".utf8), to: "inbox/file-\(i % 50).txt")
                written += 1
            } catch let error as KVStoreError {
                switch error {
                case .invalidPath, .io, .fileNotFound: refused += 1
                default: throw error
                }
            }
        }
        stop.withLock { $0 = true }
        while !swapper.isFinished { usleep(1_000) }
        print("[security] Files/ swap race: \(swaps.withLock { $0 }) swaps, \(written) writes landed, \(refused) refused, 0 outside")
        #expect(written + refused == 2_000)
        #expect(try contents(outside).isEmpty, "a write followed the swapped-in link")
        #expect(swaps.withLock { $0 } > 0)
    }

    @Test(.blockingWork) func theSnapshotsDirectorySwappedForASymbolicLinkDuringExportsNeverLetsACopyOut() throws {
        let container = try populated()
        let outside = try outside()
        let snapshots = try Snapshots(container: container)
        let real = container.snapshotsDirectory
        let link = container.path + "/Snapshots.link"
        #expect(symlink(outside, link) == 0)
        let stop = Mutex(false)
        let swaps = Mutex(0)
        let swapper = Thread {
            while !stop.withLock({ $0 }) {
                if exchange(real, link) {
                    swaps.withLock { $0 += 1 }
                    usleep(300)
                    _ = exchange(real, link)
                }
                usleep(5_000)
            }
        }
        swapper.start()
        let feed = try WidgetFeed<Feed>(name: "today", container: container)
        var exported = 0, refused = 0, published = 0
        for i in 0 ..< 60 {
            if (try? feed.publish(Feed(value: i))) != nil { published += 1 }
            do {
                try snapshots.export(from: container.store)
                exported += 1
            } catch let error as KVStoreError {
                if refused < 3 { print("[security] refused: \(error)") }
                refused += 1
            } catch let error as SnapshotError {
                if refused < 3 { print("[security] refused: \(error)") }
                refused += 1
            }
        }
        stop.withLock { $0 = true }
        while !swapper.isFinished { usleep(1_000) }
        // The fault was injected: the directory really was swapped while exports ran.
        #expect(swaps.withLock { $0 } > 0, "the swapper never swapped Snapshots/")
        print("[security] Snapshots/ swap race: \(swaps.withLock { $0 }) swaps, \(exported) exports and \(published) feeds published, \(refused) exports refused, 0 outside")
        let leaked = try contents(outside)
        #expect(leaked.isEmpty, "an export wrote through the swapped-in link: \(leaked)")
        #expect(exported + refused == 60)
        // Once the directory stays put, exports and feeds work again.
        for _ in 0 ..< 3 { try snapshots.export(from: container.store) }
        try feed.publish(Feed(value: 100))
        #expect(try feed.read().payload == Feed(value: 100))
        // An export interrupted between publishing its file and writing the manifest leaves the file
        // unlisted, as a crash would: verify says so, and prune removes it.
        let verification = try snapshots.verify()
        #expect(verification.checked.count == exported + 3)
        #expect(verification.problems.allSatisfy { $0.description.hasSuffix(": not listed in the manifest") }, "\(verification.problems)")
        try snapshots.prune(keep: exported + 3)
        #expect(try snapshots.verify().isValid)
    }

    @Test(.blockingWork, arguments: [SharingMode.privateToUser, .groupShared])
    func everythingAContainerCreatesHasTheDocumentedMode(_ sharing: SharingMode) throws {
        let previous = umask(0o022)
        defer { umask(previous) }
        var options = SharedContainer.Options()
        options.sharing = sharing
        let container = try SharedContainer(groupIdentifier: group, root: dir.path, options: options)
        let history = try History.attach(to: container)
        let scores = try container.store.collection("scores", key: String.self, value: Int.self)
        try history.enable(.collection("scores"))
        try scores.put(1, forKey: "a")
        try container.defaults().set("v", forKey: "k")
        try container.files.write(Data("x".utf8), to: "a/b/c.txt")
        let snapshots = try Snapshots(directory: container.snapshotsDirectory, sharing: sharing)
        try snapshots.export(from: container.store)
        try WidgetFeed<Feed>(name: "today", snapshotsDirectory: container.snapshotsDirectory, sharing: sharing).publish(Feed(value: 1))
        try ChangeNotifier(directory: container.notifyDirectory, fileMode: sharing.fileMode).post()

        var checked = 0
        let enumerator = try #require(FileManager.default.enumerator(atPath: containerPath))
        for case let relative as String in enumerator {
            var info = stat()
            #expect(lstat(containerPath + "/" + relative, &info) == 0)
            let mode = info.st_mode & 0o7777
            if info.st_mode & S_IFMT == S_IFDIR {
                #expect(mode == sharing.directoryMode, "\(relative): \(String(mode, radix: 8))")
            } else {
                #expect(info.st_mode & S_IFMT == S_IFREG, "\(relative) is not a regular file")
                #expect(mode == sharing.fileMode, "\(relative): \(String(mode, radix: 8))")
            }
            checked += 1
        }
        #expect(checked >= 12, "walked \(checked) entries")
    }
}
