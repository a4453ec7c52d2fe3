#if PostgreSQL
import Crypto
import Foundation
import KVStore
import Logging
import NIOCore
import PostgresNIO
@testable import SyncKitPostgres
import PostgresTesting
import SyncKit
import SyncWire
import TestSupport
import SyncTestSupport
import Testing
import Workloads

/// The server's side of a group's files (issue 49, schema version 7), against a real throwaway
/// PostgreSQL: uploads by offset in 1 MiB chunks, completion that hashes again, the refusals with
/// their figures, row-level security between groups, the manifest's reference that a read needs, the
/// push rule (`missing_blob`), collection, and the SQL reader of the manifest's CBOR.
///
/// Each test makes its own cluster and names its own group; the SQL that plants or ages rows runs
/// through `psql` off the cooperative pool.
@Suite struct BlobServerTests {
    static func group(_ name: String) -> String { "group.com.example.blobs.\(name)" }
    static let logger = Logger(label: "blob-server-tests")

    /// A cluster with the schema migrated, and a connection to it as its owner (the direct path).
    static func server() async throws -> (LocalPostgresCluster, ServerConnection) {
        let cluster = try await offPool { try LocalPostgresCluster() }
        let server = try await ServerConnection.connect(cluster.tcpURL, logger: logger, maxValueBytes: 16 << 20)
        try await server.migrate()
        return (cluster, server)
    }

    /// `count` bytes that differ from one seed to the next (SplitMix64: the same in every run).
    static func bytes(_ count: Int, seed: UInt64) -> [UInt8] {
        var generator = SplitMix64(seed: seed)
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    static func hash(_ bytes: [UInt8]) -> BlobHash { BlobHash(bytes: Array(SHA256.hash(data: bytes)))! }

    /// The manifest value of a file with `bytes`, as a device's `_files` collection encodes it.
    static func manifestValue(_ bytes: [UInt8], type: String = "image/png") throws -> [UInt8] {
        try CBORCodec<FileManifestEntry>().encode(
            FileManifestEntry(sha256: Data(hash(bytes).bytes), size: Int64(bytes.count), type: type, modified: 1_700_000_000_000))
    }

    /// A clock the server takes (now, in a hybrid timestamp), `step` counts past it.
    static func clock(_ step: Int = 0) -> UInt64 { HybridTimestamp(date: Date()).rawValue + UInt64(step) }

    static func manifestChange(_ path: String, value: [UInt8]?, token: UInt64, base: Int64 = 0) -> OutgoingChange {
        OutgoingChange(kind: "collection", name: FileManifestEntry.collectionName, key: Array(path.utf8), value: value,
                       clock: clock(Int(token)), base: base, token: token)
    }

    static func noteChange(_ key: String, _ value: String, token: UInt64) -> OutgoingChange {
        OutgoingChange(kind: "collection", name: "notes", key: Array(key.utf8), value: Array(value.utf8), clock: clock(Int(token)),
                       base: 0, token: token)
    }

    /// Uploads `bytes` as blob `hash` of `group` in 1 MiB chunks from `offset`, through `server`;
    /// the answer to each chunk.
    static func upload(_ bytes: [UInt8], from offset: Int = 0, through count: Int? = nil, group: String,
                       on server: some BlobServer, hash: BlobHash? = nil) async throws -> [BlobPutOutcome] {
        var outcomes: [BlobPutOutcome] = []
        var at = offset
        let end = count ?? bytes.count
        repeat {
            let chunk = Array(bytes[at..<min(end, at + BlobWire.chunkBytes)])
            outcomes.append(try await server.putBlobChunk(group: group, hash: hash ?? Self.hash(bytes), size: Int64(bytes.count),
                                                          offset: Int64(at), bytes: chunk))
            at += chunk.count
        } while at < end
        return outcomes
    }

    /// Reads the whole blob back through `server`, `piece` bytes at a time; nil when it is not served.
    static func readBack(_ hash: BlobHash, group: String, on server: some BlobServer, piece: Int = BlobWire.chunkBytes) async throws -> [UInt8]? {
        var bytes: [UInt8] = []
        while true {
            guard let (size, some) = try await server.readBlob(group: group, hash: hash, offset: Int64(bytes.count), length: piece) else {
                return nil
            }
            bytes += some
            if Int64(bytes.count) >= size || some.isEmpty { return bytes }
        }
    }

    /// 3.5 MiB in 1 MiB chunks: the upload stopped after two chunks (its connection closed) goes on
    /// from the offset `kvsync_blob_head` gives on a new connection, completes with the hash it was
    /// named by, and reads back identical, whole and in ranges that straddle chunks; but only while a
    /// current manifest row of the group names it. The chunks are stored uncompressed (`EXTERNAL`) in
    /// every partition.
    @Test func anUploadInChunksResumesCompletesAndReadsBackIdentical() async throws {
        let (cluster, first) = try await Self.server()
        let group = Self.group("upload")
        let bytes = Self.bytes(3 * BlobWire.chunkBytes + BlobWire.chunkBytes / 2, seed: 1)
        let hash = Self.hash(bytes)
        #expect(try await first.blobStatus(group: group, hash: hash) == nil)
        let started = try await Self.upload(bytes, through: 2 * BlobWire.chunkBytes, group: group, on: first)
        #expect(started == [.accepted(received: 1 << 20), .accepted(received: 2 << 20)])
        await first.close()

        let server = try await ServerConnection.connect(cluster.tcpURL, logger: Self.logger, maxValueBytes: 16 << 20)
        defer { Task { await server.close() }; withExtendedLifetime(cluster) {} }
        let status = try #require(try await server.blobStatus(group: group, hash: hash))
        #expect(status == BlobStatus(size: Int64(bytes.count), received: 2 << 20, complete: false))
        let rest = try await Self.upload(bytes, from: Int(status.received), group: group, on: server)
        #expect(rest == [.accepted(received: 3 << 20), .accepted(received: Int64(bytes.count))])
        #expect(try await server.blobStatus(group: group, hash: hash) == BlobStatus(size: Int64(bytes.count), received: Int64(bytes.count), complete: true))
        #expect(try await server.putBlobChunk(group: group, hash: hash, size: Int64(bytes.count), offset: 0, bytes: [1]) == .complete)

        // Complete, and named by no manifest row yet: not served.
        #expect(try await server.readBlob(group: group, hash: hash, offset: 0, length: 10) == nil)
        let pushed = try await server.push(group: group, device: "d1", changes: [Self.manifestChange("TrainerImages/a.png", value: try Self.manifestValue(bytes), token: 1)],
                                           maxClockSkew: .seconds(60))
        guard case .applied(let version) = pushed.first else {
            Issue.record("the manifest row was not applied: \(pushed)")
            return
        }
        #expect(try await Self.readBack(hash, group: group, on: server) == bytes)
        // A range across two chunks, one clipped at the end, one past it.
        let across = try #require(try await server.readBlob(group: group, hash: hash, offset: Int64(BlobWire.chunkBytes - 100), length: 1000))
        #expect(across.size == Int64(bytes.count) && across.bytes == Array(bytes[(BlobWire.chunkBytes - 100)..<(BlobWire.chunkBytes + 900)]))
        let tail = try #require(try await server.readBlob(group: group, hash: hash, offset: Int64(bytes.count - 10), length: 1 << 20))
        #expect(tail.bytes == Array(bytes.suffix(10)))
        #expect(try await server.readBlob(group: group, hash: hash, offset: Int64(bytes.count + 5), length: 10)?.bytes == [])
        // A read of more than a chunk, or at a negative offset, is refused in one line.
        await #expect(throws: ReplicationError.self) { _ = try await server.readBlob(group: group, hash: hash, offset: 0, length: (1 << 20) + 1) }
        await #expect(throws: ReplicationError.self) { _ = try await server.readBlob(group: group, hash: hash, offset: -1, length: 1) }

        // The manifest row deleted (its tombstone current): no longer served.
        let deleted = try await server.push(group: group, device: "d1",
                                            changes: [Self.manifestChange("TrainerImages/a.png", value: nil, token: 2, base: version)],
                                            maxClockSkew: .seconds(60))
        guard case .applied? = deleted.first else {
            Issue.record("the manifest delete was not applied: \(deleted)")
            return
        }
        #expect(try await server.readBlob(group: group, hash: hash, offset: 0, length: 10) == nil)

        // A file of no bytes completes with its one empty chunk.
        let empty = Self.hash([])
        #expect(try await server.putBlobChunk(group: group, hash: empty, size: 0, offset: 0, bytes: []) == .accepted(received: 0))
        #expect(try await server.blobStatus(group: group, hash: empty)?.complete == true)
        let storage = try await offPool {
            try cluster.psql("""
                SELECT DISTINCT a.attstorage FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
                WHERE c.relname LIKE 'kvsync_blob_chunks%' AND a.attname = 'data'
                """).trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(storage == "e")
    }

    /// A byte flipped in the second of three chunks: the last chunk is answered `hash_mismatch`, and
    /// nothing of the upload is left (no row, no chunk, nothing served even with a manifest row that
    /// names it, and a push of that row is still `missing_blob`); the same upload sent right then
    /// completes from 0.
    @Test func aFlippedByteIsRefusedAtCompletionAndNothingOfItIsKept() async throws {
        let (cluster, server) = try await Self.server()
        defer { Task { await server.close() }; withExtendedLifetime(cluster) {} }
        let group = Self.group("flipped")
        let bytes = Self.bytes(2 * BlobWire.chunkBytes + 1000, seed: 2)
        let hash = Self.hash(bytes)
        var damaged = bytes
        damaged[BlobWire.chunkBytes + 12_345] ^= 0x01
        let answers = try await Self.upload(damaged, group: group, on: server, hash: hash)
        #expect(answers == [.accepted(received: 1 << 20), .accepted(received: 2 << 20), .hashMismatch])
        #expect(try await server.blobStatus(group: group, hash: hash) == nil)
        #expect(try await offPool {
            try cluster.count("SELECT count(*) FROM kvsync_blob_chunks WHERE group_id = '\(group)'") +
                cluster.count("SELECT count(*) FROM kvsync_blobs WHERE group_id = '\(group)'")
        } == 0)
        let pushed = try await server.push(group: group, device: "d1", changes: [Self.manifestChange("a.png", value: try Self.manifestValue(bytes), token: 1)],
                                           maxClockSkew: .seconds(60))
        #expect(pushed == [.missingBlob])
        #expect(try await server.readBlob(group: group, hash: hash, offset: 0, length: 10) == nil)
        #expect(try await Self.upload(bytes, group: group, on: server) == [.accepted(received: 1 << 20), .accepted(received: 2 << 20),
                                                                          .accepted(received: Int64(bytes.count))])
    }

    /// Every outcome of `kvsync_blob_put` with its figure, through the statement the gateway runs (its
    /// limits are the caller's), and the requests no honest client sends refused in one line.
    @Test func eachRefusalCarriesItsFigure() async throws {
        let (cluster, server) = try await Self.server()
        defer { Task { await server.close() }; withExtendedLifetime(cluster) {} }
        let group = Self.group("refusals")
        func put(_ bytes: [UInt8], hash: BlobHash? = nil, size: Int64, offset: Int64, maxFile: Int64 = 1 << 20,
                 maxGroup: Int64 = 3 << 20) async throws -> BlobPutOutcome {
            try await ServerStatements.blobPut(group: group, hash: hash ?? Self.hash(bytes), size: size, offset: offset,
                                               bytes: ByteBuffer(bytes: bytes), maxFileBytes: maxFile, maxGroupBytes: maxGroup,
                                               on: server.connection, logger: Self.logger)
        }
        let big = Self.bytes(BlobWire.chunkBytes + 1, seed: 3)
        #expect(try await put(big, size: Int64(big.count), offset: 0, maxFile: 4 << 20) == .chunkTooLarge(limit: Int64(BlobWire.chunkBytes)))
        #expect(try await put(Array(big.prefix(10)), size: (1 << 20) + 1, offset: 0) == .tooLarge(limit: 1 << 20))
        let file = Self.bytes(1000, seed: 4)
        let fileHash = Self.hash(file)
        #expect(try await put(Array(file[100..<200]), hash: fileHash, size: 1000, offset: 100) == .offsetMismatch(received: 0))
        #expect(try await put(Array(file.prefix(400)), hash: fileHash, size: 1000, offset: 0) == .accepted(received: 400))
        #expect(try await put(Array(file[300..<500]), hash: fileHash, size: 1000, offset: 300) == .offsetMismatch(received: 400))
        #expect(try await put(Array(file[400..<500]), hash: fileHash, size: 999, offset: 400) == .sizeMismatch(size: 1000))
        #expect(try await put(Array(file[400...]), hash: fileHash, size: 1000, offset: 400) == .accepted(received: 1000))
        #expect(try await put(Array(file[400...]), hash: fileHash, size: 1000, offset: 400) == .complete)
        // The group holds 1000 bytes of 3 MiB: a new 1 MiB file fits twice, and its whole size counts
        // from its first chunk.
        let one = Self.bytes(1 << 20, seed: 5), two = Self.bytes(1 << 20, seed: 6), three = Self.bytes(1 << 20, seed: 7)
        #expect(try await put(Array(one.prefix(10)), hash: Self.hash(one), size: 1 << 20, offset: 0) == .accepted(received: 10))
        #expect(try await put(Array(two.prefix(10)), hash: Self.hash(two), size: 1 << 20, offset: 0) == .accepted(received: 10))
        #expect(try await put(Array(three.prefix(10)), hash: Self.hash(three), size: 1 << 20, offset: 0) == .quotaExceeded(limit: 3 << 20))
        #expect(try await put(Array(three.prefix(10)), hash: Self.hash(three), size: 1 << 20, offset: 0, maxGroup: 4 << 20) == .accepted(received: 10))

        // What no honest client sends: one line each, nothing stored.
        func refused(_ body: () async throws -> BlobPutOutcome) async -> String {
            do {
                let answer = try await body()
                return "answered \(answer)"
            } catch {
                return ServerStatements.describe(error)
            }
        }
        #expect(await refused { try await put([1], size: 10, offset: -1) }.hasPrefix("kvsync_blob_put: a negative size (10), offset (-1)"))
        #expect(await refused { try await put([1, 2], size: 10, offset: 9) }.hasPrefix("kvsync_blob_put: a chunk of 2 bytes at offset 9 ends past the blob's size, 10"))
        #expect(await refused { try await put([1], size: -1, offset: 0) }.hasPrefix("kvsync_blob_put: a negative size (-1)"))
        #expect(await refused { try await put([1], size: 10, offset: Int64.max) }.hasPrefix("kvsync_blob_put: a chunk of 1 bytes at offset 9223372036854775807"))
        let shortHash = try await offPool { () -> String in
            do {
                return "answered " + (try cluster.psql("SELECT * FROM kvsync_blob_put('\(group)', '\\x00ff'::bytea, 1, 0, '\\x00'::bytea, 10, 10)"))
            } catch {
                return "\(error)"
            }
        }
        #expect(shortHash.contains("kvsync_blob_put: a blob hash is 32 bytes (a SHA-256), not 2"), "\(shortHash)")
        #expect(try await offPool { try cluster.count("SELECT count(*) FROM kvsync_blobs WHERE group_id = '\(group)'") } == 4)
    }

    /// Group Y's blob, complete and named by Y's manifest: group X's transactions, scoped as a gateway
    /// scopes them, get for its hash exactly what they get for a hash no one has (no row for head or
    /// read), directly too; naming group Y from X's scope is refused; X uploading the same bytes makes
    /// a blob of its own (no deduplication across groups); and a read-only credential uploads nothing.
    @Test func anotherGroupsHashAnswersExactlyAsAnUnknownOne() async throws {
        let (cluster, server) = try await Self.server()
        defer { Task { await server.close() }; withExtendedLifetime(cluster) {} }
        let (x, y) = (Self.group("x"), Self.group("y"))
        let bytes = Self.bytes(5000, seed: 8)
        let hash = Self.hash(bytes)
        let unknown = Self.hash(Self.bytes(10, seed: 9))
        #expect(try await Self.upload(bytes, group: y, on: server) == [.accepted(received: 5000)])
        #expect(try await server.push(group: y, device: "dy", changes: [Self.manifestChange("a.png", value: try Self.manifestValue(bytes), token: 1)],
                                      maxClockSkew: .seconds(60)).first != .missingBlob)
        let connection = server.connection
        /// Runs `body` in a transaction scoped to `group` (as the gateway's role), read-only or not.
        func scoped<R: Sendable>(_ group: String, readOnly: Bool = false,
                                 _ body: @escaping @Sendable (PostgresConnection) async throws -> R) async throws -> R {
            try await connection.withTransaction(logger: Self.logger) { tx in
                try await ServerStatements.scope(group: group, device: "d", readOnly: readOnly, on: tx, logger: Self.logger)
                return try await body(tx)
            }
        }
        struct Answers: Equatable, Sendable { var head: BlobStatus?; var read: Int64? }
        func answers(_ group: String, _ hash: BlobHash) async throws -> Answers {
            try await scoped(group) { tx in
                Answers(head: try await ServerStatements.blobHead(group: group, hash: hash, on: tx, logger: Self.logger),
                        read: try await ServerStatements.blobRead(group: group, hash: hash, offset: 0, length: 100, on: tx, logger: Self.logger)?.size)
            }
        }
        #expect(try await answers(y, hash) == Answers(head: BlobStatus(size: 5000, received: 5000, complete: true), read: 5000))
        #expect(try await answers(x, hash) == Answers(head: nil, read: nil))
        #expect(try await answers(x, hash) == (try await answers(x, unknown)))
        // Directly (the owner's session), group X's name gets the same.
        #expect(try await server.blobStatus(group: x, hash: hash) == nil)
        #expect(try await server.readBlob(group: x, hash: hash, offset: 0, length: 100) == nil)
        // From X's scope, Y's name is refused before any row is read.
        await #expect(throws: (any Error).self) {
            _ = try await scoped(x) { tx in try await ServerStatements.blobHead(group: y, hash: hash, on: tx, logger: Self.logger) }
        }
        // X uploads the same bytes: its own blob, from 0.
        let own = try await scoped(x) { tx in
            try await ServerStatements.blobPut(group: x, hash: hash, size: 5000, offset: 0, bytes: ByteBuffer(bytes: bytes.prefix(100)),
                                               maxFileBytes: BlobWire.defaultMaxFileBytes, maxGroupBytes: BlobWire.defaultMaxGroupBytes,
                                               on: tx, logger: Self.logger)
        }
        #expect(own == .accepted(received: 100))
        // A read-only credential's transaction may look, not upload.
        var readOnly = "uploaded"
        do {
            _ = try await scoped(x, readOnly: true) { tx in
                try await ServerStatements.blobPut(group: x, hash: unknown, size: 10, offset: 0, bytes: ByteBuffer(bytes: [1]),
                                                   maxFileBytes: 100, maxGroupBytes: 100, on: tx, logger: Self.logger)
            }
        } catch {
            readOnly = ServerStatements.describe(error)
        }
        #expect(readOnly.hasPrefix("kvsync_blob_put: this credential is read-only"), "\(readOnly)")
        #expect(try await scoped(x, readOnly: true) { tx in try await ServerStatements.blobHead(group: x, hash: hash, on: tx, logger: Self.logger) }
                == BlobStatus(size: 5000, received: 100, complete: false))
    }

    /// A batch with a manifest row whose file the server has not got (or a value that names no hash)
    /// between two notes: the row is answered `missing_blob` and not applied, the notes are, in both
    /// of `kvsync_push`'s bodies (the set-based one, and the loop a batch that repeats a key takes).
    /// Once the bytes are uploaded, the same change is applied. A manifest delete needs no file.
    @Test func aPushWithAMissingBlobAppliesTheRestOfTheBatch() async throws {
        let (cluster, server) = try await Self.server()
        defer { Task { await server.close() }; withExtendedLifetime(cluster) {} }
        let group = Self.group("push")
        let bytes = Self.bytes(3000, seed: 10)
        let manifest = Self.manifestChange("TrainerImages/t.png", value: try Self.manifestValue(bytes), token: 2)
        func push(_ changes: [OutgoingChange]) async throws -> [PushOutcome] {
            try await server.push(group: group, device: "d1", changes: changes, maxClockSkew: .seconds(60))
        }
        func stateKeys() async throws -> [String] {
            try await offPool {
                try cluster.psql("SELECT name || '/' || convert_from(key, 'UTF8') FROM kvsync_state WHERE group_id = '\(group)' ORDER BY name COLLATE \"C\", key")
                    .split(separator: "\n").map(String.init)
            }
        }
        let set = try await push([Self.noteChange("a", "1", token: 1), manifest, Self.noteChange("b", "2", token: 3),
                                  Self.manifestChange("junk", value: [0xA1, 0x01, 0x02], token: 4)])
        #expect(set.count == 4 && set[1] == .missingBlob && set[3] == .missingBlob)
        guard case .applied = set[0], case .applied = set[2] else {
            Issue.record("the notes were not applied: \(set)")
            return
        }
        #expect(try await stateKeys() == ["notes/a", "notes/b"])
        // The loop: a key twice in one batch.
        let loop = try await push([Self.noteChange("c", "1", token: 5), Self.noteChange("c", "2", token: 6), manifest])
        #expect(loop.count == 3 && loop[2] == .missingBlob && !loop[0...1].contains(.missingBlob))
        #expect(try await stateKeys() == ["notes/a", "notes/b", "notes/c"])
        // A missing_blob took no sequence number and wrote no log row.
        #expect(try await offPool { try cluster.count("SELECT count(*) FROM kvsync_changes WHERE group_id = '\(group)' AND name = '_files'") } == 0)

        #expect(try await Self.upload(bytes, group: group, on: server) == [.accepted(received: 3000)])
        let again = try await push([manifest])
        guard case .applied(let version)? = again.first else {
            Issue.record("the manifest row was not applied once its file was: \(again)")
            return
        }
        #expect(try await stateKeys() == ["_files/TrainerImages/t.png", "notes/a", "notes/b", "notes/c"])
        let removed = try await push([Self.manifestChange("TrainerImages/t.png", value: nil, token: 7, base: version)])
        guard case .applied? = removed.first else {
            Issue.record("a manifest delete was not applied: \(removed)")
            return
        }
    }

    /// A replicator whose container holds a manifest row the server has no file for: the round pushes
    /// the rest, reports the row as waiting for its file, keeps it pending (not acknowledged, no
    /// error), and sends it in a later round once the bytes are on the server.
    @Test func aReplicatorKeepsAChangeWaitingForItsFilePendingAndSendsTheRest() async throws {
        let (cluster, server) = try await Self.server()
        defer { Task { await server.close() }; withExtendedLifetime(cluster) {} }
        let device = try Device(group: Self.group("replicator"))
        let files = try device.container.store.collection(FileManifestEntry.collectionName, key: String.self, value: FileManifestEntry.self)
        try Replication.declare(.collection(FileManifestEntry.collectionName), in: device.container, history: device.history, now: Date())
        let replicator = try Replicator(container: device.container, endpoint: .database(cluster.tcpURL),
                                        targets: device.targets + [.collection(files)])
        let bytes = Self.bytes(2000, seed: 11)
        try device.write { tx in
            try files.put(FileManifestEntry(sha256: Data(Self.hash(bytes).bytes), size: 2000, type: "image/png", modified: 1), forKey: "a.png", in: tx)
            try device.notes.put("trainer", forKey: "t1", in: tx)
        }
        try device.put("later", "t2")
        let first = try await replicator.sync()
        #expect(first.waitingForFiles == 1 && first.pushed == 2, "\(first)")
        #expect(try device.status().pendingChanges == 1)
        #expect(try await offPool { try cluster.storedNotes(group: device.group).count } == 2)
        let second = try await replicator.sync()
        #expect(second.waitingForFiles == 1 && second.pushed == 0, "\(second)")

        #expect(try await Self.upload(bytes, group: device.group, on: server) == [.accepted(received: 2000)])
        let third = try await replicator.sync()
        #expect(third.waitingForFiles == 0 && third.pushed == 1, "\(third)")
        #expect(try device.status().pendingChanges == 0)
        #expect(try await server.readBlob(group: device.group, hash: Self.hash(bytes), offset: 0, length: 2000)?.bytes == bytes)
        await replicator.close()
    }

    /// `kvsync_blob_gc` with the CLI's graces (24 h for an upload, 7 days for an unreferenced blob): a
    /// dry run lists exactly the orphan (complete, named by no manifest row, 8 days old) and the
    /// abandoned upload (2 days untouched), and spares a fresh upload in flight, a fresh unreferenced
    /// blob, an old blob a current manifest row names, and an old one a push referenced a moment ago
    /// (its row deleted since); run for real, it removes those two with their chunks, and then lists
    /// nothing.
    @Test func collectionListsExactlyTheOrphansAndSparesUploadsInFlightAndReferencedBlobs() async throws {
        let (cluster, server) = try await Self.server()
        defer { Task { await server.close() }; withExtendedLifetime(cluster) {} }
        let group = Self.group("gc")
        let files = (0..<6).map { Self.bytes(2000 + $0, seed: 20 + UInt64($0)) }
        let (orphan, abandoned, inFlight, fresh, referenced, touched) = (files[0], files[1], files[2], files[3], files[4], files[5])
        for file in [orphan, fresh, referenced, touched] {
            #expect(try await Self.upload(file, group: group, on: server) == [.accepted(received: Int64(file.count))])
        }
        for file in [abandoned, inFlight] {
            #expect(try await server.putBlobChunk(group: group, hash: Self.hash(file), size: Int64(file.count), offset: 0,
                                                  bytes: Array(file.prefix(1000))) == .accepted(received: 1000))
        }
        #expect(try await server.push(group: group, device: "d1", changes: [Self.manifestChange("r.png", value: try Self.manifestValue(referenced), token: 1)],
                                      maxClockSkew: .seconds(60)).first != .missingBlob)
        func age(_ file: [UInt8], days: Int) async throws {
            try await offPool {
                _ = try cluster.psql("""
                    UPDATE kvsync_blobs SET created_at = now() - interval '\(days) days', updated_at = now() - interval '\(days) days',
                           completed_at = CASE WHEN complete THEN now() - interval '\(days) days' END
                    WHERE group_id = '\(group)' AND sha256 = '\\x\(Self.hash(file).hex)'
                    """)
            }
        }
        try await age(orphan, days: 8)
        try await age(referenced, days: 8)
        try await age(touched, days: 8)
        try await age(abandoned, days: 2)
        // A push names `touched` (it is touched), then its row is deleted: a week's grace from now.
        let named = try await server.push(group: group, device: "d1", changes: [Self.manifestChange("t.png", value: try Self.manifestValue(touched), token: 2)],
                                          maxClockSkew: .seconds(60))
        guard case .applied(let version)? = named.first else {
            Issue.record("\(named)")
            return
        }
        _ = try await server.push(group: group, device: "d1", changes: [Self.manifestChange("t.png", value: nil, token: 3, base: version)],
                                  maxClockSkew: .seconds(60))
        func gc(dryRun: Bool) async throws -> [ServerStatements.CollectedBlob] {
            try await ServerStatements.blobGC(uploadingGrace: .seconds(86_400), unreferencedGrace: .seconds(7 * 86_400), dryRun: dryRun,
                                              on: server.connection, logger: Self.logger).filter { $0.group == group }
        }
        let expected = Set([ServerStatements.CollectedBlob(group: group, hash: Self.hash(orphan), size: Int64(orphan.count), complete: true),
                            ServerStatements.CollectedBlob(group: group, hash: Self.hash(abandoned), size: Int64(abandoned.count), complete: false)])
        let listed = try await gc(dryRun: true)
        #expect(Set(listed) == expected && listed.count == 2, "\(listed)")
        #expect(try await gc(dryRun: true) == listed)
        #expect(Set(try await gc(dryRun: false)) == expected)
        #expect(try await gc(dryRun: true).isEmpty)
        for file in [inFlight, fresh, referenced, touched] {
            #expect(try await server.blobStatus(group: group, hash: Self.hash(file)) != nil)
        }
        for file in [orphan, abandoned] {
            #expect(try await server.blobStatus(group: group, hash: Self.hash(file)) == nil)
        }
        #expect(try await offPool {
            try cluster.count("""
                SELECT count(*) FROM kvsync_blob_chunks c WHERE c.group_id = '\(group)'
                AND NOT EXISTS (SELECT FROM kvsync_blobs b WHERE b.group_id = c.group_id AND b.sha256 = c.sha256)
                """)
        } == 0)
    }

    /// `kvsync_manifest_hash` against the Swift encoder: 1,200 generated manifest entries (sizes and
    /// clocks across every CBOR width, types of every length class) give their `sha256`; written
    /// variants give what RFC 8949 says (keys in any order, items of every kind skipped, non-shortest
    /// heads; NULL for a hash of the wrong length, a key twice, a map of indefinite length, nesting
    /// past the bound, reserved or misplaced bytes); 6,000 random byte strings, 2,000 maps of random
    /// items and every truncation of 60 entries give NULL, and none raises.
    @Test func theManifestHashAgreesWithTheSwiftEncoderAndNeverRaises() async throws {
        let (cluster, server) = try await Self.server()
        defer { Task { await server.close() }; withExtendedLifetime(cluster) {} }
        var generator = SplitMix64(seed: 49)
        func random(_ range: ClosedRange<Int64>) -> Int64 { Int64.random(in: range, using: &generator) }
        let widths: [ClosedRange<Int64>] = [0...23, 24...255, 256...65_535, 65_536...4_294_967_295, 4_294_967_296...Int64.max]
        let types = ["", "image/png", "application/octet-stream", String(repeating: "x", count: 23), String(repeating: "é", count: 40),
                     String(repeating: "t", count: 300)]
        var entries: [FileManifestEntry] = []
        for index in 0..<1_200 {
            let hash = Data((0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })
            let modified = random(widths[index % widths.count])
            entries.append(FileManifestEntry(sha256: hash, size: random(widths[(index / 5) % widths.count]), type: types[index % types.count],
                                             modified: index % 2 == 0 ? modified : -modified - 1))
        }
        let encoded = try entries.map { try CBORCodec<FileManifestEntry>().encode($0) }
        let hashes = try await Self.manifestHashes(encoded, on: server)
        #expect(hashes.count == entries.count)
        #expect(zip(hashes, entries).allSatisfy { $0 == Array($1.sha256) }, "\(zip(hashes, entries).filter { $0 != Array($1.sha256) }.count) differ")

        // Written by hand: each with the hash it must give (nil: NULL).
        let h = [UInt8](repeating: 0xAB, count: 32)
        func head(_ major: UInt8, _ value: UInt64) -> [UInt8] {
            switch value {
            case 0..<24: [major << 5 | UInt8(value)]
            case 24..<256: [major << 5 | 24, UInt8(value)]
            case 256..<65_536: [major << 5 | 25] + withUnsafeBytes(of: UInt16(value).bigEndian, Array.init)
            case 65_536..<4_294_967_296: [major << 5 | 26] + withUnsafeBytes(of: UInt32(value).bigEndian, Array.init)
            default: [major << 5 | 27] + withUnsafeBytes(of: value.bigEndian, Array.init)
            }
        }
        func text(_ string: String) -> [UInt8] { head(3, UInt64(string.utf8.count)) + Array(string.utf8) }
        func bytes(_ value: [UInt8]) -> [UInt8] { head(2, UInt64(value.count)) + value }
        func cborMap(_ pairs: [[UInt8]]) -> [UInt8] { head(5, UInt64(pairs.count / 2)) + pairs.flatMap { $0 } }
        let sha = text("sha256")
        // The map and 63 arrays in it: as deep as the decoder's default (64) goes; one more is too deep.
        let deep = (0..<63).reduce([0x01] as [UInt8]) { inner, _ in [0x81] + inner }
        let tooDeep = (0..<64).reduce([0x01] as [UInt8]) { inner, _ in [0x81] + inner }
        let cases: [(String, [UInt8], [UInt8]?)] = [
            ("the encoder's", try CBORCodec<FileManifestEntry>().encode(FileManifestEntry(sha256: Data(h), size: 5, modified: 6)), h),
            ("keys in another order", cborMap([text("type"), text("a"), text("size"), [0x05], sha, bytes(h)]), h),
            ("every kind skipped", cborMap([text("x"), [0x85, 0x01, 0x82, 0x02, 0xA1, 0x61, 0x61, 0x41, 0x00, 0xC1, 0xFB] + [UInt8](repeating: 0, count: 8)
                                        + [0x24, 0x1B, 0, 0, 1, 0, 0, 0, 0, 0],
                                        text("f"), [0xF9, 0x3C, 0x00], text("n"), [0xF6], text("t"), [0xF5], text("u"), [0xF7],
                                        text("simple"), [0xF8, 0x20], text("neg"), [0x3B, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF],
                                        sha, bytes(h),
                                        text("i"), [0x9F, 0x01, 0x9F, 0xFF, 0xFF], text("s"), [0x7F, 0x62, 0x61, 0x62, 0x61, 0x63, 0xFF],
                                        text("b"), [0x5F, 0xFF], text("m"), [0xBF, 0x61, 0x6B, 0x01, 0xFF],
                                        [0x01], [0x02], text("bigtag"), [0xDB, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00],
                                        text("deep"), deep]), h),
            ("non-shortest heads", [0xB9, 0x00, 0x01, 0x78, 0x06] + Array("sha256".utf8) + [0x59, 0x00, 0x20] + h, h),
            ("an empty map", [0xA0], nil),
            ("no sha256", cborMap([text("size"), [0x05]]), nil),
            ("31 bytes", cborMap([sha, bytes(Array(h.prefix(31)))]), nil),
            ("33 bytes", cborMap([sha, bytes(h + [0])]), nil),
            ("a text hash", cborMap([sha, head(3, 32) + [UInt8](repeating: 0x61, count: 32)]), nil),
            ("a hash in chunks", cborMap([sha, [0x5F] + bytes(Array(h.prefix(16))) + bytes(Array(h.suffix(16))) + [0xFF]]), nil),
            ("the key twice", cborMap([sha, bytes(h), sha, bytes(h)]), nil),
            ("a map of indefinite length", [0xBF] + sha + bytes(h) + [0xFF], nil),
            ("an array", [0x82] + sha + bytes(h), nil),
            ("a byte after it", cborMap([sha, bytes(h)]) + [0x00], nil),
            ("a reserved head", cborMap([text("x"), [0x1C], sha, bytes(h)]), nil),
            ("a break outside", cborMap([text("x"), [0xFF], sha, bytes(h)]), nil),
            ("nested past the bound", cborMap([text("x"), tooDeep, sha, bytes(h)]), nil),
            ("a byte string in a text's chunks", cborMap([text("x"), [0x7F, 0x41, 0x00, 0xFF], sha, bytes(h)]), nil),
            ("a simple value below 32 in two bytes", cborMap([text("x"), [0xF8, 0x10], sha, bytes(h)]), nil),
            ("a string of 2^64 - 1 bytes", cborMap([text("x"), [0x5B] + [UInt8](repeating: 0xFF, count: 8), sha, bytes(h)]), nil),
            ("2^32 entries", [0xBA, 0xFF, 0xFF, 0xFF, 0xFF] + sha + bytes(h), nil),
            ("an array of 2^32 items", cborMap([text("x"), [0x9A, 0xFF, 0xFF, 0xFF, 0xFF, 0x01], sha, bytes(h)]), nil),
            ("over 64 KiB", cborMap([text("x"), bytes([UInt8](repeating: 0, count: 70_000)), sha, bytes(h)]), nil),
        ]
        let written = try await Self.manifestHashes(cases.map(\.1), on: server)
        for ((name, _, expected), found) in zip(cases, written) {
            #expect(found == expected, "\(name): \(found.map { Hex.encode($0) } ?? "NULL")")
        }

        // Noise and truncations: NULL, and no error (one statement for all).
        var noise: [[UInt8]] = (0..<6_000).map { index in
            (0..<Int.random(in: 0...(index % 3 == 0 ? 8 : 120), using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
        }
        // Maps of random items, which reach deeper into the walk than plain noise.
        noise += (0..<2_000).map { _ in [0xA0 | UInt8.random(in: 1...8, using: &generator)]
            + (0..<Int.random(in: 1...40, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) } }
        let truncated = encoded.prefix(60).flatMap { value in (0..<value.count).map { Array(value.prefix($0)) } }
        let noiseHashes = try await Self.manifestHashes(noise, on: server)
        #expect(noiseHashes.count == noise.count && noiseHashes.allSatisfy { $0 == nil })
        let truncatedHashes = try await Self.manifestHashes(truncated, on: server)
        #expect(truncated.count > 3_000 && truncatedHashes.count == truncated.count && truncatedHashes.allSatisfy { $0 == nil })
        // NULL in, NULL out (the function is strict).
        var null = false
        for try await (found) in try await server.connection.query("SELECT kvsync_manifest_hash(NULL) IS NULL", logger: Self.logger).decode(Bool.self) {
            null = found
        }
        #expect(null)
    }

    /// `kvtool sync blobs ls` and `gc` on the direct path, as the database's owner: the list says
    /// which blob is referenced, unreferenced or still uploading (and how far), in JSON too; `gc
    /// --dry-run` lists the aged orphan and removes nothing, `gc` removes it, and a container option
    /// is refused in one line.
    @Test func kvtoolListsAndCollectsTheServersBlobs() async throws {
        let (cluster, server) = try await Self.server()
        defer { Task { await server.close() }; withExtendedLifetime(cluster) {} }
        let group = Self.group("kvtool")
        let (kept, orphan, partial) = (Self.bytes(300, seed: 30), Self.bytes(400, seed: 31), Self.bytes(500, seed: 32))
        for file in [kept, orphan] {
            #expect(try await Self.upload(file, group: group, on: server) == [.accepted(received: Int64(file.count))])
        }
        #expect(try await server.putBlobChunk(group: group, hash: Self.hash(partial), size: 500, offset: 0, bytes: Array(partial.prefix(100)))
                == .accepted(received: 100))
        #expect(try await server.push(group: group, device: "d1", changes: [Self.manifestChange("k.png", value: try Self.manifestValue(kept), token: 1)],
                                      maxClockSkew: .seconds(60)).first != .missingBlob)
        let database = "postgres://kv@127.0.0.1:\(cluster.port)/kv"
        func kvtool(_ arguments: [String]) async throws -> ProcessResult {
            try await offPool { try run(productsDirectory() + "/kvtool", ["sync", "blobs"] + arguments + ["--database", database], timeout: 120) }
        }
        let listed = try await kvtool(["ls", "--group", group])
        #expect(listed.status == 0, "\(listed.stderr)")
        let expected = [(kept, "referenced"), (orphan, "unreferenced"), (partial, "uploading 100/500")]
            .sorted { Self.hash($0.0).hex < Self.hash($1.0).hex }
            .map { "\(Self.hash($0.0).hex)\t\($0.0.count)\t\($0.1)\t\(group)" }
        #expect(listed.stdout.split(separator: "\n").map(String.init) == expected)
        let json = try await kvtool(["ls", "--group", group, "--json"])
        #expect(json.status == 0 && json.stdout.contains("\"referenced\":true") && json.stdout.contains("\"received\":100"), "\(json.stdout)")

        try await offPool {
            _ = try cluster.psql("UPDATE kvsync_blobs SET updated_at = now() - interval '8 days', completed_at = now() - interval '8 days' WHERE group_id = '\(group)' AND complete")
        }
        let dry = try await kvtool(["gc", "--dry-run"])
        #expect(dry.status == 0, "\(dry.stderr)")
        #expect(dry.stdout == "\(Self.hash(orphan).hex)\t400\tunreferenced\t\(group)\nwould remove 1 blob, 400 bytes\n")
        let removed = try await kvtool(["gc"])
        #expect(removed.stdout.hasSuffix("removed 1 blob, 400 bytes\n"), "\(removed.stdout)")
        #expect(try await kvtool(["gc", "--dry-run"]).stdout == "would remove 0 blobs, 0 bytes\n")
        #expect(try await server.blobStatus(group: group, hash: Self.hash(orphan)) == nil)
        #expect(try await server.blobStatus(group: group, hash: Self.hash(kept))?.complete == true)
        let refused = try await offPool { try run(productsDirectory() + "/kvtool", ["sync", "blobs", "gc", "--root", "/tmp", "--database", database], timeout: 60) }
        #expect(refused.status == 64 && refused.stderr.contains("has no use for --root"), "\(refused.status) \(refused.stderr)")
    }

    /// `kvsync_manifest_hash` of each value, in one statement, in order.
    static func manifestHashes(_ values: [[UInt8]], on server: ServerConnection) async throws -> [[UInt8]?] {
        let buffers = values.map { ByteBuffer(bytes: $0) }
        var hashes: [[UInt8]?] = []
        for try await (hash) in try await server.connection.query(
            "SELECT kvsync_manifest_hash(u.v) FROM unnest(\(buffers)::bytea[]) WITH ORDINALITY AS u(v, i) ORDER BY u.i", logger: logger)
            .decode(ByteBuffer?.self) {
            hashes.append(hash.map { Array($0.readableBytesView) })
        }
        return hashes
    }
}

#endif
