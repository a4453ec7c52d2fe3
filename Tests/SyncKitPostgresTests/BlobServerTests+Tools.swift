#if PostgreSQL
import Foundation
import KVStore
@testable import SyncKitPostgres
import PostgresTesting
import SyncKit
import SyncWire
import TestSupport
import SyncTestSupport
import Testing

/// `kvtool sync blobs fetch` and `verify` (issue 49): one blob of the container's group into a file,
/// and the container's own copies checked against their hashes.
extension BlobServerTests {
    /// `fetch` by hash and by path writes exactly the bytes; another group's hash answers as an
    /// unknown one (exit 1); a server whose copy was changed behind its back (a byte flipped in the
    /// database) is refused by the hash, and --out keeps what it held: never a half or wrong file.
    @Test func kvtoolFetchesABlobOfTheGroupByHashOrPathAndNeverLeavesABadFile() async throws {
        let (cluster, server) = try await Self.server()
        defer { Task { await server.close() }; withExtendedLifetime(cluster) {} }
        let group = Self.group("fetch"), other = Self.group("fetch-other")
        let device = try Device(group: group)
        try Replication.files(prefix: "TrainerImages/", fetch: .eager, in: device.container)
        let image = Self.bytes(1_500_000, seed: 40), foreign = Self.bytes(700, seed: 41)
        let path = "TrainerImages/ash.png"
        try device.write { tx in _ = try device.container.files.write(image, to: path, in: tx) }
        let replicator = try device.replicator(cluster.tcpURL)
        let report = try await replicator.sync()
        await replicator.close()
        #expect(report.pushed == 1 && report.waitingForFiles == 0, "\(report)")
        // Group Y's blob, complete and named by Y's manifest.
        #expect(try await Self.upload(foreign, group: other, on: server) == [.accepted(received: 700)])
        #expect(try await server.push(group: other, device: "y", changes: [Self.manifestChange("y.png", value: try Self.manifestValue(foreign), token: 1)],
                                      maxClockSkew: .seconds(60)).first != .missingBlob)

        let directory = TemporaryDirectory()
        let database = "postgres://kv@127.0.0.1:\(cluster.port)/kv"
        func fetch(_ blob: String, _ out: String) async throws -> ProcessResult {
            try await offPool {
                try run(productsDirectory() + "/kvtool", ["--root", device.directory.path, "--group", group, "sync", "blobs", "fetch", blob,
                                                          "--out", directory.path + "/" + out, "--server", database], timeout: 120)
            }
        }
        func contents(_ out: String) -> Data? { FileManager.default.contents(atPath: directory.path + "/" + out) }
        let hex = Self.hash(image).hex
        let byHash = try await fetch(hex, "by-hash.png")
        #expect(byHash.status == 0 && byHash.stdout == "\(hex)\t\(image.count)\t\(directory.path)/by-hash.png\n", "\(byHash.status) \(byHash.stderr)")
        #expect(contents("by-hash.png") == Data(image))
        let byPath = try await fetch(path, "by-path.png")
        #expect(byPath.status == 0 && contents("by-path.png") == Data(image), "\(byPath.status) \(byPath.stderr)")

        #expect(FileManager.default.createFile(atPath: directory.path + "/kept.png", contents: Data("old".utf8)))
        let foreignAnswer = try await fetch(Self.hash(foreign).hex, "kept.png")
        #expect(foreignAnswer.status == 1 && foreignAnswer.stderr.contains("has no complete copy"), "\(foreignAnswer.status) \(foreignAnswer.stderr)")
        let unknown = try await fetch(Self.hash(Self.bytes(10, seed: 42)).hex, "kept.png")
        #expect(unknown.status == 1 && unknown.stderr == foreignAnswer.stderr.replacingOccurrences(of: Self.hash(foreign).hex, with: Self.hash(Self.bytes(10, seed: 42)).hex),
                "\(unknown.stderr)")
        let notAPath = try await fetch("TrainerImages/none.png", "kept.png")
        #expect(notAPath.status == 1 && notAPath.stderr.contains("neither a SHA-256"), "\(notAPath.stderr)")

        // The server's copy changed behind its back: the second chunk's last byte flipped.
        _ = try await offPool {
            try cluster.psql("""
                UPDATE kvsync_blob_chunks SET data = overlay(data placing '\\x00'::bytea from octet_length(data))
                WHERE group_id = '\(group)' AND sha256 = '\\x\(hex)' AND "offset" = \(1 << 20)
                """)
        }
        let flipped = try await fetch(hex, "kept.png")
        #expect(flipped.status == 74 && flipped.stderr.contains("do not hash to its SHA-256"), "\(flipped.status) \(flipped.stderr)")
        #expect(contents("kept.png") == Data("old".utf8))
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path).sorted() == ["by-hash.png", "by-path.png", "kept.png"])
    }

    /// `verify` passes a container whose copies match, then reports a byte flipped in `Blobs/` (the
    /// copy, and the path it is linked to) and a file waiting to upload whose bytes are gone from its
    /// path and `Blobs/`, one line each, exit 1; and it changes nothing: every file of the container
    /// (but LMDB's lock files) is as it was, the flipped byte included. No cluster: it reads only.
    @Test func kvtoolVerifiesTheContainersCopiesAndChangesNothing() async throws {
        let device = try Device(group: Self.group("verify"))
        try Replication.files(prefix: "TrainerImages/", fetch: .eager, in: device.container)
        let (one, two) = (Self.bytes(3_000, seed: 50), Self.bytes(2_000, seed: 51))
        try device.write { tx in
            _ = try device.container.files.write(one, to: "TrainerImages/one.png", in: tx)
            _ = try device.container.files.write(two, to: "TrainerImages/two.png", in: tx)
        }
        func verify() async throws -> ProcessResult {
            try await offPool {
                try run(productsDirectory() + "/kvtool", ["--root", device.directory.path, "--group", device.group, "sync", "blobs", "verify"], timeout: 60)
            }
        }
        let clean = try await verify()
        #expect(clean.status == 0 && clean.stdout == "verified 2 copies and 2 files\n", "\(clean.status) \(clean.stdout) \(clean.stderr)")

        let hex = Self.hash(one).hex
        let copy = device.container.layout.blobs + "/" + hex
        var flipped = one
        flipped[10] ^= 0xFF
        let handle = try #require(FileHandle(forWritingAtPath: copy))
        try handle.seek(toOffset: 10)
        try handle.write(contentsOf: [flipped[10]])
        try handle.close()
        // A path recorded waiting to upload whose bytes are gone from its path and from Blobs/.
        #expect(unlink(device.container.layout.files + "/TrainerImages/two.png") == 0)
        #expect(unlink(device.container.layout.blobs + "/" + Self.hash(two).hex) == 0)
        let before = Self.snapshot(device.directory.path)
        let found = try await verify()
        #expect(found.status == 1, "\(found.status) \(found.stderr)")
        let flippedHex = Self.hash(flipped).hex
        #expect(found.stdout.split(separator: "\n").map(String.init) == [
            "Blobs/\(hex): its 3000 bytes hash to \(flippedHex)",
            "Files/TrainerImages/one.png: its 3000 bytes hash to \(flippedHex), its manifest row names \(hex) (3000 bytes)",
            "Files/TrainerImages/two.png: is recorded waiting_to_upload but its bytes are neither at its path nor in Blobs/",
        ], "\(found.stdout)")
        #expect(found.stderr.contains("3 problems with the container's files' bytes"), "\(found.stderr)")
        #expect(Self.snapshot(device.directory.path) == before)
        #expect(FileManager.default.contents(atPath: copy) == Data(flipped))
    }

    /// Every file under `root` and its bytes, but LMDB's lock files (a reader's slot is written there).
    static func snapshot(_ root: String) -> [String: Data] {
        var files: [String: Data] = [:]
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let relative = enumerator?.nextObject() as? String {
            guard !relative.hasSuffix("lock.mdb"), let data = FileManager.default.contents(atPath: root + "/" + relative) else { continue }
            files[relative] = data
        }
        return files
    }
}
#endif
