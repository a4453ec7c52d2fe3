import Foundation
import Testing
import TestSupport
@testable import KVStore
import Workloads
#if canImport(Glibc)
import Glibc
#endif

/// Files that travel with the container (issue 49), the store's side: a write of a file under a
/// replicated prefix records its manifest entry in the transaction of the write, and the path gets the
/// bytes when it commits; reads serve exactly the manifest's bytes or say they are not here.
@Suite struct ReplicatedFilesTests {
    static let png = Array(TrainerNotificationFlow.samplePNG)

    /// A container with `img/` declared replicated (eager).
    static func container(_ dir: TemporaryDirectory) throws -> SharedContainer {
        let container = try dir.container()
        try FileManifest.declare(prefix: "img/", fetch: .eager, in: container.store)
        return container
    }

    @Test(.blockingWork) func aWriteUnderAReplicatedPrefixRecordsItsEntryInTheTransactionAndThePathFollowsTheCommit() throws {
        let dir = TemporaryDirectory()
        let container = try Self.container(dir)
        let notes = try container.store.collection("notes", key: String.self, value: String.self)
        let observer = RecordingObserver()
        container.store.addObserver(observer)
        defer { container.store.removeObserver(observer) }
        let entry = try container.store.write { tx -> FileManifestEntry? in
            try notes.put("trainer", forKey: "img/a.png", in: tx)
            let entry = try container.files.write(Self.png, to: "img/a.png", in: tx)
            // Inside the transaction: the path does not have the bytes yet; the manifest row is in it.
            #expect(!container.files.exists("img/a.png"))
            #expect(try FileManifest.entry(at: "img/a.png", in: tx) == entry)
            return entry
        }
        let recorded = try #require(entry)
        #expect(recorded.sha256 == Data(SHA256Hasher.hash(Self.png)) && recorded.size == Int64(Self.png.count))
        #expect(recorded.type == "image/png")
        #expect(try container.files.read("img/a.png") == Data(Self.png))
        #expect(try container.files.readVerified("img/a.png") == Data(Self.png))
        #expect(try container.files.manifestEntry(for: "img/a.png") == recorded)
        // One transaction: the note and the manifest row, committed together.
        let committed = try #require(observer.after.last)
        #expect(Set(committed.mutations.map(\.target)) == [.collection("notes"), .collection("_files")])
        // The bytes are kept under their hash, the same inode as the path.
        let blob = container.layout.blobs + "/" + SHA256Hasher.hex(Array(recorded.sha256))
        var a = stat(), b = stat()
        #expect(lstat(blob, &a) == 0 && lstat(container.layout.files + "/img/a.png", &b) == 0 && a.st_ino == b.st_ino)
        #expect(try container.files.fileStatus().map(\.state) == [.waitingToUpload])
        // The CBOR value is the contract's: a map with text keys, `sha256` a 32-byte string.
        let raw = try container.store.read { tx in try tx.rawGet(try #require(try FileManifest.database("_files", in: tx)), Array("img/a.png".utf8)) }
        guard case .map(let fields) = try CBORValue.decode(try #require(raw)) else { Issue.record("not a CBOR map"); return }
        // (In the struct's order, sha256 first: the encoder sorts a dictionary's keys, not a struct's.)
        #expect(fields.map(\.key) == [.text("sha256"), .text("size"), .text("type"), .text("modified")])
        #expect(fields.first { $0.key == .text("sha256") }?.value == .bytes(SHA256Hasher.hash(Self.png)))
    }

    @Test(.blockingWork) func aWriteOutsideEveryReplicatedPrefixRecordsNothing() throws {
        let dir = TemporaryDirectory()
        let container = try Self.container(dir)
        let entry = try container.store.write { tx in try container.files.write(Self.png, to: "other/a.png", in: tx) }
        #expect(entry == nil)
        #expect(try container.files.manifestEntry(for: "other/a.png") == nil)
        #expect(try container.files.read("other/a.png") == Data(Self.png))
        // `img` itself, and a name that only starts like the prefix, are not under it.
        _ = try container.store.write { tx in try container.files.write(Self.png, to: "imgs.png", in: tx) }
        #expect(try container.files.manifestEntry(for: "imgs.png") == nil)
        // A container that declared nothing records nothing either.
        let plain = try dir.container("group.com.example.plain")
        #expect(try plain.store.write { tx in try plain.files.write(Self.png, to: "img/a.png", in: tx) } == nil)
        #expect(try plain.files.read("img/a.png") == Data(Self.png))
    }

    @Test(.blockingWork) func aRemoveRecordsTheTombstoneAndTheFileGoesAtTheCommit() throws {
        let dir = TemporaryDirectory()
        let container = try Self.container(dir)
        try container.store.write { tx in _ = try container.files.write(Self.png, to: "img/a.png", in: tx) }
        let observer = RecordingObserver()
        container.store.addObserver(observer)
        defer { container.store.removeObserver(observer) }
        try container.store.write { tx in
            try container.files.remove("img/a.png", in: tx)
            #expect(container.files.exists("img/a.png"))  // until the commit
        }
        #expect(!container.files.exists("img/a.png"))
        #expect(try container.files.manifestEntry(for: "img/a.png") == nil)
        let deletes = try #require(observer.after.last).mutations.filter { $0.target == .collection("_files") }
        #expect(deletes.map(\.operation) == [.delete] && deletes.map(\.key) == [Array("img/a.png".utf8)])
        // Nothing there at all: the remove says so, and nothing is recorded.
        #expect(throws: KVStoreError.fileNotFound(path: "img/a.png")) {
            try container.store.write { tx in try container.files.remove("img/a.png", in: tx) }
        }
    }

    @Test(.blockingWork) func aTombstoneFromAnotherDeviceRemovesTheFileAndItsLocalState() throws {
        let dir = TemporaryDirectory()
        let container = try Self.container(dir)
        try container.store.write { tx in
            _ = try container.files.write(Self.png, to: "img/a.png", in: tx)
            _ = try container.files.write(Self.png, to: "img/b.png", in: tx)
        }
        // What a pull of another device's remove does: the row's delete, nothing else.
        try container.store.write { tx in _ = try FileManifest.delete(at: "img/a.png", in: tx) }
        #expect(container.files.exists("img/a.png"))
        #expect(try container.files.removeFilesTheManifestDropped() == ["img/a.png"])
        #expect(!container.files.exists("img/a.png") && container.files.exists("img/b.png"))
        #expect(try container.files.localState(for: "img/a.png") == nil)
        #expect(try container.files.removeFilesTheManifestDropped() == [])
    }

    @Test(.blockingWork) func copiesNoRowNamesAreCollectedAfterTheirGraceAndTheOthersStay() throws {
        let dir = TemporaryDirectory()
        let container = try Self.container(dir)
        let other = Array("another version".utf8)
        try container.store.write { tx in _ = try container.files.write(other, to: "img/a.png", in: tx) }
        try container.store.write { tx in _ = try container.files.write(Self.png, to: "img/a.png", in: tx) }
        try container.store.write { tx in _ = try container.files.write(other, to: "plain.txt", in: tx) }
        let old = SHA256Hasher.hex(SHA256Hasher.hash(other)), current = SHA256Hasher.hex(SHA256Hasher.hash(Self.png))
        // Within the grace nothing goes; past it, only the copy no row names (the first version; the
        // plain file's copy is the same bytes, and its path keeps its own link).
        #expect(try container.files.removeUnreferencedBlobs(olderThan: 3600) == [])
        #expect(try container.files.removeUnreferencedBlobs(olderThan: 0) == [old])
        #expect(try container.files.read("plain.txt") == Data(other))
        #expect(try container.files.readVerified("img/a.png") == Data(Self.png))
        #expect(FileManager.default.fileExists(atPath: container.layout.blobs + "/" + current))
    }

    @Test(.blockingWork) func anAbortedTransactionLeavesTheManifestThePathAndThePreviousBytes() throws {
        let dir = TemporaryDirectory()
        let container = try Self.container(dir)
        let notes = try container.store.collection("notes", key: String.self, value: String.self)
        let first = try #require(try container.store.write { tx in try container.files.write(Self.png, to: "img/a.png", in: tx) })
        struct Abort: Error {}
        let second = Array("not the same bytes".utf8)
        #expect(throws: Abort.self) {
            try container.store.write { tx in
                try notes.put("new", forKey: "img/a.png", in: tx)
                try container.files.write(second, to: "img/a.png", in: tx)
                try container.files.remove("img/a.png", in: tx)
                try container.files.write(second, to: "img/b.png", in: tx)
                throw Abort()
            }
        }
        #expect(try container.files.manifestEntry(for: "img/a.png") == first)
        #expect(try container.files.manifestEntry(for: "img/b.png") == nil)
        #expect(try notes.get("img/a.png") == nil)
        #expect(try container.files.read("img/a.png") == Data(Self.png))
        #expect(!container.files.exists("img/b.png"))
        #expect(try container.files.readVerified("img/a.png") == Data(Self.png))
        // The path rewritten outside any transaction (its inode replaced): the bytes the manifest
        // named stay in Blobs/ until uploaded.
        try container.files.publish(to: "img/a.png", temporaryName: TemporaryFileName.make(for: "a.png")) { fd, path in
            try second.withUnsafeBytes { try SystemCall.writeAll(fd, $0, path: path) }
        }
        #expect(try container.files.readBlobChunk(SHA256Hasher.hex(Array(first.sha256)), offset: 0, length: 1 << 20).bytes == Self.png)
    }

    @Test(.blockingWork) func aManifestRowWithoutItsBytesReadsAsNotYetDownloadedAndOtherBytesAreNeverServed() throws {
        let dir = TemporaryDirectory()
        let container = try Self.container(dir)
        let entry = try #require(try container.store.write { tx in try container.files.write(Self.png, to: "img/a.png", in: tx) })
        let hex = SHA256Hasher.hex(Array(entry.sha256))
        let blob = container.layout.blobs + "/" + hex
        let path = container.layout.files + "/img/a.png"
        // The path changed in place (a co-tenant): served from Blobs/, and the path gets them back.
        #expect(unlink(path) == 0)
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: path))
        #expect(try container.files.readVerified("img/a.png") == Data(Self.png))
        #expect(try container.files.read("img/a.png") == Data(Self.png))
        // No copy left: a typed error, never the wrong bytes, never a crash.
        #expect(unlink(blob) == 0 && unlink(path) == 0)
        let expected = SharedFilesError.notYetDownloaded(path: "img/a.png", sha256: hex)
        #expect(throws: expected) { try container.files.readVerified("img/a.png") }
        try Data("garbage".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: expected) { try container.files.readVerified("img/a.png") }
        // A link planted at the path, to a file holding exactly those bytes: never followed.
        #expect(unlink(path) == 0)
        let outside = dir.path + "/outside.png"
        try Data(Self.png).write(to: URL(fileURLWithPath: outside))
        #expect(symlink(outside, path) == 0)
        #expect(throws: expected) { try container.files.readVerified("img/a.png") }
        // … nor at the copy's name in Blobs/.
        #expect(symlink(outside, blob) == 0)
        #expect(throws: expected) { try container.files.readVerified("img/a.png") }
        // Recorded waiting to upload, but the copy is gone: reported missing.
        #expect(try container.files.fileStatus().map(\.state) == [.missing])
        // A path no manifest row names reads as the plain read does.
        #expect(throws: KVStoreError.fileNotFound(path: "img/none.png")) { try container.files.readVerified("img/none.png") }
    }

    @Test(.blockingWork) func pathsAreCheckedBeforeAnythingIsWrittenOrRecorded() throws {
        let dir = TemporaryDirectory()
        let container = try Self.container(dir)
        for bad in ["../x.png", "img/../../x.png", "/etc/passwd", "img//a.png", "img/.kvtmp-a", "img/a\0.png", "img/．．/a.png"] {
            #expect(throws: KVStoreError.self, "\(bad)") {
                try container.store.write { tx in try container.files.write(Self.png, to: bad, in: tx) }
            }
            #expect(throws: KVStoreError.self, "\(bad)") {
                try container.store.write { tx in try container.files.remove(bad, in: tx) }
            }
        }
        #expect(try container.store.read { tx in try FileManifest.entries(in: tx) }.isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: container.layout.blobs).filter { !$0.hasPrefix(".") }.isEmpty)
        #expect(throws: KVStoreError.self) { try FileManifest.declare(prefix: "../x", fetch: .eager, in: container.store) }
        #expect(throws: KVStoreError.self) { try FileManifest.declare(prefix: "x/", fetch: .lazy(budget: 0), in: container.store) }
        // A SharedFiles of its own (no container) has no store to record in: a typed error.
        let own = try SharedFiles(directory: container.layout.files)
        #expect(throws: SharedFilesError.notAContainer(directory: container.layout.files)) {
            try container.store.write { tx in try own.write(Self.png, to: "img/a.png", in: tx) }
        }
    }

    @Test(.blockingWork) func aPlainWriteUnderAReplicatedPrefixRecordsItsEntryInATransactionOfItsOwn() throws {
        let dir = TemporaryDirectory()
        let container = try Self.container(dir)
        try container.files.write(Self.png, to: "img/a.png")
        #expect(try container.files.manifestEntry(for: "img/a.png")?.sha256 == Data(SHA256Hasher.hash(Self.png)))
        #expect(try container.files.read("img/a.png") == Data(Self.png))
        try container.files.write(Data("x".utf8), to: "plain.txt")
        #expect(try container.files.manifestEntry(for: "plain.txt") == nil)
        let declared = try container.files.replicatedPrefixes()
        #expect(declared == [ReplicatedFilePrefix(prefix: "img/", fetch: .eager)])
    }

    /// Another process writes records and their files, one transaction each; this one reads both in
    /// one read transaction again and again: never a record without its manifest row or the other way
    /// round, and each row's hash is the record's. Once the writer is done, every path has its bytes.
    @Test(.blockingWork) func anotherProcessSeesARecordAndItsFileEntryTogetherNeverOneWithoutTheOther() throws {
        let dir = TemporaryDirectory()
        let group = "group.com.example.files"
        let container = try dir.container(group)
        try FileManifest.declare(prefix: "img/", fetch: .eager, in: container.store)
        let notes = try container.store.collection("notes", key: String.self, value: String.self)
        let count = 60
        let writer = try BackgroundProcess.helper(["files-writer", dir.path, group, "\(count)"])
        var passes = 0, seen = 0
        var problems: [String] = []
        while true {
            let running = writer.process.isRunning
            var notesByPath: [String: String] = [:]
            let manifest = try container.store.read { tx in
                notesByPath = [:]  // (a read may run again)
                try notes.forEach(in: tx) { key, value in
                    notesByPath[key] = value
                    return true
                }
                return try FileManifest.entries(in: tx)
            }
            let manifestByPath = Dictionary(uniqueKeysWithValues: manifest.map { ($0.path, SHA256Hasher.hex(Array($0.entry.sha256))) })
            if manifestByPath != notesByPath { problems.append("pass \(passes): notes \(notesByPath.count), manifest \(manifestByPath.count)") }
            seen = max(seen, notesByPath.count)
            passes += 1
            if !running { break }
            usleep(2_000)
        }
        let result = writer.wait()
        #expect(result.status == 0, "\(result.stderr)")
        #expect(problems.isEmpty, "\(problems.prefix(5))")
        #expect(seen == count)
        for i in 0..<count {
            let data = try container.files.readVerified("img/\(i).png")
            #expect(SHA256Hasher.hex(SHA256Hasher.hash(Array(data))) == (try notes.get("img/\(i).png")))
        }
        print("ReplicatedFilesTests: \(passes) reads (\(problems.count) inconsistent) while another process wrote \(count) records with their files")
    }
}
