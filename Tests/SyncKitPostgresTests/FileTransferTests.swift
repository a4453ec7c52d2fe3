#if PostgreSQL
import Foundation
import KVStore
import Logging
import NIOCore
import SyncKit
@testable import SyncKitPostgres
import SyncWire
import PostgresTesting
import TestSupport
import SyncTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The device's transfer engine for a container's files (issue 49) against a real throwaway
/// PostgreSQL: a resumable upload that a `kill -9` stops halfway, downloads that a reader in another
/// process never sees half of, and every refusal of the server typed, with its limit.
///
/// Every blocking step (initdb, psql, kvtest-helper) runs off the cooperative pool (`offPool`).
@Suite struct FileTransferTests {
    static func group(_ name: String) -> String { "group.com.example.files.\(name)" }

    /// A cluster whose tables `kvtool sync token issue` made (it migrates), and its URL.
    static func cluster(group: String) async throws -> (LocalPostgresCluster, ServerURL) {
        try await offPool {
            let cluster = try LocalPostgresCluster()
            let url = "postgres://kv@127.0.0.1:\(cluster.port)/kv"
            let issued = try run(productsDirectory() + "/kvtool", ["sync", "token", "issue", "--group", group, "--database", url])
            guard issued.status == 0 else { throw ReplicationError.server("kvtool sync token issue: \(issued.stderr)") }
            return (cluster, try ServerURL(url))
        }
    }

    /// What the server holds of blob `hex` of `group`: "received/size/complete/sha256-of-its-chunks".
    static func serverBlob(_ cluster: LocalPostgresCluster, group: String, hex: String) async throws -> String {
        try await offPool {
            try cluster.psql("""
                SELECT b.received || '/' || b.size || '/' || b.complete || '/' ||
                       coalesce((SELECT encode(sha256(string_agg(c.data, ''::bytea ORDER BY c."offset")), 'hex')
                                 FROM kvsync_blob_chunks c WHERE c.group_id = b.group_id AND c.sha256 = b.sha256), '-')
                FROM kvsync_blobs b WHERE b.group_id = '\(group)' AND b.sha256 = '\\x\(hex)'
                """).trimmingCharacters(in: .whitespacesAndNewlines)
        }
    }

    /// The spec's test: a 20 MiB upload killed with `kill -9` once the server holds half of it goes on
    /// from the server's offset in a new process, and what the server completes hashes as the file.
    @Test func aTwentyMiBUploadKilledHalfwayResumesFromTheServersOffset() async throws {
        let group = Self.group("resume")
        let (cluster, url) = try await Self.cluster(group: group)
        let dir = TemporaryDirectory()
        let size = 20 << 20, half = 10 << 20
        let written = try await offPool { try helper(["files-write", dir.path, group, "big/file.bin", "\(size)", "7"]) }
        #expect(written.status == 0, "\(written.stderr)")
        let hex = written.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(hex.count == 64)

        let first = try BackgroundProcess.helper(["files-upload", dir.path, group, "\(url)", "big/file.bin", "\(half)"])
        let paused = await offPoolValue { first.waitForLine { $0 == "paused" } }
        #expect(paused != nil, "\(first.output)")
        first.kill(SIGKILL)
        let killed = await offPoolValue { first.wait() }
        #expect(killed.status != 0)
        let halfway = try await Self.serverBlob(cluster, group: group, hex: hex)
        let received = Int(halfway.split(separator: "/").first ?? "") ?? -1
        #expect(received >= half && received < size && halfway.contains("/false/"), "\(halfway)")

        let second = try await offPool { try helper(["files-upload", dir.path, group, "\(url)", "big/file.bin"]) }
        #expect(second.status == 0, "\(second.stdout) \(second.stderr)")
        let done = try #require(second.stdout.split(separator: "\n").last { $0.hasPrefix("ok ") })
        let words = done.split(separator: " ")
        #expect(words.count == 7 && Int(words[2]) == received && Int(words[4]) == size - received, "\(done)")
        #expect(try await Self.serverBlob(cluster, group: group, hex: hex) == "\(size)/\(size)/true/\(hex)")
        let container = try dir.container(group)
        #expect(try container.files.fileStatus().map(\.state) == [.present])
        print("FileTransferTests: killed at \(received) of \(size) bytes; the second process sent \(size - received)")
    }

    /// Device A writes a 4 MiB file, uploads it and syncs its manifest; device B syncs: before it
    /// downloads, the file reads `notYetDownloaded` and its status is missing; a reader process on B
    /// reading the path the whole time sees nothing, then the whole file, never a part of it.
    @Test func aDownloadIsPublishedWholeAndAReaderNeverSeesHalfOfIt() async throws {
        let group = Self.group("download")
        let (cluster, url) = try await Self.cluster(group: group)
        defer { withExtendedLifetime(cluster) {} }  // the cluster stops when it is released
        let a = TemporaryDirectory(), b = TemporaryDirectory()
        let deviceA = try a.container(group), deviceB = try b.container(group)
        // Lazy on B: its sync records the file missing and leaves the download to this test (an eager
        // prefix is downloaded in the round that brings its row).
        try Replication.files(prefix: "img/", fetch: .eager, in: deviceA)
        try Replication.files(prefix: "img/", fetch: .lazy(budget: 64 << 20), in: deviceB)
        let bytes = (0..<(4 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 2_654_435_761 >> 7) }
        let hex = SHA256Hasher.hex(SHA256Hasher.hash(bytes))
        try await deviceA.store.write(author: "app") { tx in _ = try deviceA.files.write(bytes, to: "img/big.png", in: tx) }
        let uploaded = try await FileTransfers.upload(path: "img/big.png", in: deviceA, server: url, group: group)
        #expect(uploaded.sentBytes == Int64(bytes.count) && uploaded.resumedFrom == 0)
        for container in [deviceA, deviceB] {
            let manifest = try container.store.collection("_files", key: String.self, value: FileManifestEntry.self)
            let replicator = try Replicator(container: container, endpoint: .database(url), targets: [.collection(manifest)])
            _ = try await replicator.sync()
            await replicator.close()
        }
        #expect(try deviceB.files.manifestEntry(for: "img/big.png")?.sha256 == Data(SHA256Hasher.hash(bytes)))
        #expect(throws: SharedFilesError.notYetDownloaded(path: "img/big.png", sha256: hex)) { try deviceB.files.readVerified("img/big.png") }
        #expect(try deviceB.files.fileStatus().map(\.state) == [.missing])

        let reader = try BackgroundProcess.helper(["files-read-loop", b.path, group, "img/big.png", hex, "\(BuildScale.seconds(60))"])
        #expect(await offPoolValue { reader.waitForLine { $0 == "reading" } } != nil)
        let fetched = try await FileTransfers.download(path: "img/big.png", in: deviceB, server: url, group: group)
        #expect(fetched == Int64(bytes.count))
        let seen = await offPoolValue { reader.wait() }
        let line = try #require(seen.lines.last { $0.hasPrefix("reads ") })
        #expect(line.hasSuffix("whole 1 other 0"), "\(line) \(seen.stderr)")
        #expect(try deviceB.files.readVerified("img/big.png") == Data(bytes))
        #expect(try deviceB.files.fileStatus().map(\.state) == [.present])
        // Nothing of the download is left behind in Blobs/ but the file itself.
        let left = try FileManager.default.contentsOfDirectory(atPath: deviceB.layout.blobs).filter { !$0.hasPrefix(".publish") }
        #expect(left == [hex])
        print("FileTransferTests: reader on B saw \(line)")
    }

    /// `too_large` and `quota_exceeded` stop the upload with a typed error carrying the server's limit,
    /// and leave the file waiting to upload with the reason; a copy changed in place after the write is
    /// refused by the server as a whole (`hash_mismatch`), read again, and never sent as the manifest's
    /// bytes; two uploads of one file at once both end with the server's copy complete.
    @Test func refusalsAreTypedWithTheirLimitAndNothingHalfIsPublished() async throws {
        let group = Self.group("refusals")
        let (cluster, url) = try await Self.cluster(group: group)
        let dir = TemporaryDirectory()
        let container = try dir.container(group)
        try Replication.files(prefix: "img/", fetch: .eager, in: container)
        let bytes = (0..<(3 << 20 + 5)).map { UInt8(truncatingIfNeeded: $0 &* 40_503 >> 3) }
        let hex = SHA256Hasher.hex(SHA256Hasher.hash(bytes))
        try await container.store.write(author: "app") { tx in _ = try container.files.write(bytes, to: "img/a.bin", in: tx) }
        let connection = try await ServerConnection.connect(url, logger: Logger(label: "test"), maxValueBytes: 1 << 20)
        defer { Task { await connection.close() } }

        let small = LimitedBlobServer(connection: connection, maxFileBytes: 1 << 20, maxGroupBytes: 1 << 30)
        await #expect(throws: FileTransferError.tooLarge(path: "img/a.bin", size: Int64(bytes.count), limit: 1 << 20)) {
            try await FileTransfer(server: small, group: group, files: container.files).upload(path: "img/a.bin")
        }
        let waiting = try #require(try container.files.localState(for: "img/a.bin"))
        #expect(waiting.state == .waitingToUpload && waiting.problem?.contains("too_large") == true)
        let quota = LimitedBlobServer(connection: connection, maxFileBytes: 64 << 20, maxGroupBytes: 2 << 20)
        await #expect(throws: FileTransferError.quotaExceeded(path: "img/a.bin", limit: 2 << 20)) {
            try await FileTransfer(server: quota, group: group, files: container.files).upload(path: "img/a.bin")
        }
        #expect(try await Self.serverBlob(cluster, group: group, hex: hex) == "")

        // The kept copy changed in place (a co-tenant): the server refuses the whole, the engine reads
        // the copy again, finds it changed, and stops; the server keeps nothing of it.
        let blob = container.layout.blobs + "/" + hex
        let handle = try #require(FileHandle(forUpdatingAtPath: blob))
        try handle.seek(toOffset: 2 << 20)
        try handle.write(contentsOf: Data([0xFF ^ bytes[2 << 20]]))
        try handle.close()
        await #expect(throws: FileTransferError.localBytesDiffer(path: "img/a.bin")) {
            try await FileTransfers.upload(path: "img/a.bin", in: container, server: url, group: group)
        }
        #expect(try await Self.serverBlob(cluster, group: group, hex: hex) == "")

        // Written again (the copy replaced): two uploads at once meet at the server's offset and both end.
        try await container.store.write(author: "app") { tx in _ = try container.files.write(bytes, to: "img/a.bin", in: tx) }
        async let one = FileTransfers.upload(path: "img/a.bin", in: container, server: url, group: group)
        async let two = FileTransfers.upload(path: "img/a.bin", in: container, server: url, group: group)
        let (r1, r2) = try await (one, two)
        #expect(r1.sentBytes + r2.sentBytes >= Int64(bytes.count))
        #expect(try await Self.serverBlob(cluster, group: group, hex: hex) == "\(bytes.count)/\(bytes.count)/true/\(hex)")
        #expect(try container.files.fileStatus().map(\.state) == [.present])
        print("FileTransferTests: two uploads at once sent \(r1.sentBytes) + \(r2.sentBytes) bytes of \(bytes.count)")
    }

    /// A lazy prefix's budget (issue 49): files fetched past it evict the least recently read one,
    /// which then reads `notYetDownloaded` and comes back when fetched again; a file waiting to upload
    /// is never evicted, however old its last access. Files of 100 KiB against a budget of 250 KiB.
    @Test func aLazyPrefixOverItsBudgetEvictsTheLeastRecentlyReadFile() async throws {
        let group = Self.group("lru")
        let (cluster, url) = try await Self.cluster(group: group)
        defer { withExtendedLifetime(cluster) {} }
        let a = TemporaryDirectory(), b = TemporaryDirectory()
        let deviceA = try a.container(group), deviceB = try b.container(group)
        try Replication.files(prefix: "docs/", fetch: .lazy(budget: 64 << 20), in: deviceA)
        try Replication.files(prefix: "docs/", fetch: .lazy(budget: 250 << 10), in: deviceB)
        let files = (1...3).map { n in (path: "docs/\(n).bin", bytes: (0..<(100 << 10)).map { UInt8(truncatingIfNeeded: ($0 &* (n * 7 + 1)) >> 3) }) }
        try await deviceA.store.write(author: "app") { tx in
            for file in files { _ = try deviceA.files.write(file.bytes, to: file.path, in: tx) }
        }
        for container in [deviceA, deviceB] {
            let manifest = try container.store.collection("_files", key: String.self, value: FileManifestEntry.self)
            let replicator = try Replicator(container: container, endpoint: .database(url), targets: [.collection(manifest)])
            _ = try await replicator.sync()  // A uploads its files first, then pushes their rows
            await replicator.close()
        }
        #expect(try deviceB.files.fileStatus().map(\.state) == [.missing, .missing, .missing])
        func fetch(_ n: Int) async throws { _ = try await FileTransfers.download(path: files[n].path, in: deviceB, server: url, group: group) }
        func age(_ n: Int, minutes: Int64) throws {
            var local = try #require(try deviceB.files.localState(for: files[n].path))
            local.lastAccess -= minutes * 60_000
            try deviceB.files.setLocalState(local, for: files[n].path)
        }
        func states() throws -> [LocalFileState.Kind] { try deviceB.files.fileStatus().map(\.state) }

        try await fetch(0)
        try await fetch(1)
        #expect(try states() == [.present, .present, .missing])  // 200 KiB: within the budget
        // 1 fetched ten minutes ago, 2 five; 1 is read now (its access is older than a minute: recorded).
        try age(0, minutes: 10)
        try age(1, minutes: 5)
        #expect(try deviceB.files.readVerified(files[0].path) == Data(files[0].bytes))
        try await fetch(2)
        #expect(try states() == [.present, .missing, .present])
        let evicted = SHA256Hasher.hex(SHA256Hasher.hash(files[1].bytes))
        #expect(throws: SharedFilesError.notYetDownloaded(path: files[1].path, sha256: evicted)) { try deviceB.files.readVerified(files[1].path) }
        #expect(!FileManager.default.fileExists(atPath: deviceB.layout.blobs + "/" + evicted))
        // Fetched again, it comes back whole, and the least recently used of the others goes.
        try age(2, minutes: 1)
        try await fetch(1)
        #expect(try deviceB.files.readVerified(files[1].path) == Data(files[1].bytes))
        #expect(try states().filter { $0 == .present }.count == 2)

        // B's own write waits to upload: never evicted, whatever its last access.
        let own = (0..<(100 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 131 >> 2) }
        try await deviceB.store.write(author: "app") { tx in _ = try deviceB.files.write(own, to: "docs/0-own.bin", in: tx) }
        var waiting = try #require(try deviceB.files.localState(for: "docs/0-own.bin"))
        waiting.lastAccess = 0
        try deviceB.files.setLocalState(waiting, for: "docs/0-own.bin")
        for n in 0..<3 { try await fetch(n) }
        #expect(try deviceB.files.localState(for: "docs/0-own.bin")?.state == .waitingToUpload)
        #expect(try deviceB.files.readVerified("docs/0-own.bin") == Data(own))
        #expect(try states().filter { $0 == .present }.count == 2)
    }
}

/// The direct path's SQL (``ServerStatements``' blob statements, as a gateway runs them) with limits of
/// the test's choosing: a real server that refuses sooner, not a stand-in.
final class LimitedBlobServer: BlobServer {
    let connection: ServerConnection
    let maxFileBytes: Int64
    let maxGroupBytes: Int64

    init(connection: ServerConnection, maxFileBytes: Int64, maxGroupBytes: Int64) {
        (self.connection, self.maxFileBytes, self.maxGroupBytes) = (connection, maxFileBytes, maxGroupBytes)
    }

    func blobStatus(group: String, hash: BlobHash) async throws -> BlobStatus? {
        try await connection.blobStatus(group: group, hash: hash)
    }

    func putBlobChunk(group: String, hash: BlobHash, size: Int64, offset: Int64, bytes: [UInt8]) async throws -> BlobPutOutcome {
        let (files, total, pg, logger) = (maxFileBytes, maxGroupBytes, connection.connection, connection.logger)
        return try await connection.mapErrors {
            try await ServerStatements.blobPut(group: group, hash: hash, size: size, offset: offset, bytes: ByteBuffer(bytes: bytes),
                                               maxFileBytes: files, maxGroupBytes: total, on: pg, logger: logger)
        }
    }

    func readBlob(group: String, hash: BlobHash, offset: Int64, length: Int) async throws -> (size: Int64, bytes: [UInt8])? {
        try await connection.readBlob(group: group, hash: hash, offset: offset, length: length)
    }
}

/// Runs blocking `work` off the cooperative pool and returns its value.
func offPoolValue<R: Sendable>(_ work: @escaping @Sendable () -> R) async -> R {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: work()) }
    }
}
#endif
