import Foundation
import KVStore
import SyncKit
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Opening a published snapshot checks the file it actually opens: the SHA-256 is computed on the
/// descriptor LMDB then maps, a link in the snapshot's place is refused, and verifying is the default.
@Suite struct SnapshotOpenSafetyTests {
    let dir = TemporaryDirectory()

    /// A container with one value, `note` at key `a`, and its snapshots.
    func published(_ group: String, note: String) throws -> (SharedContainer, Snapshots, SnapshotEntry) {
        let container = try dir.container(group)
        try container.store.collection("notes", key: String.self, value: String.self).put(note, forKey: "a")
        let snapshots = try Snapshots(container: container)
        return (container, snapshots, try snapshots.export(from: container.store))
    }

    func note(in store: Store) throws -> String? {
        try store.collection("notes", key: String.self, value: String.self).get("a")
    }

    /// One flipped byte in the middle of a snapshot: LMDB would map it as it is (and a damaged page can
    /// crash the reader), so a plain `openLatest()` refuses it.
    @Test func openingVerifiesTheChecksumByDefault() throws {
        let (_, snapshots, entry) = try published("group.com.example.verify", note: "good")
        let path = snapshots.path(of: entry)
        let fd = open(path, O_RDWR)
        try #require(fd >= 0)
        var byte: UInt8 = 0
        #expect(pread(fd, &byte, 1, off_t(entry.size / 2)) == 1)
        byte ^= 0xFF
        #expect(pwrite(fd, &byte, 1, off_t(entry.size / 2)) == 1)
        close(fd)
        #expect(throws: SnapshotError.self) { _ = try snapshots.openLatest() }
        #expect(throws: SnapshotError.self) { _ = try snapshots.open(generation: entry.generation) }
    }

    /// A co-tenant replaced the snapshot file by a link to a file of its own (a valid store with other
    /// contents): the link is refused even without verifying, and nothing behind it is opened.
    @Test func aSnapshotReplacedByASymbolicLinkIsRefused() throws {
        let (_, snapshots, entry) = try published("group.com.example.linked", note: "good")
        let (_, other, otherEntry) = try published("group.com.example.other", note: "evil")
        let path = snapshots.path(of: entry)
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: other.path(of: otherEntry))
        for verifying in [true, false] {
            #expect(verifying ? "verifying" : "not verifying") {
                _ = try snapshots.open(generation: entry.generation, verifying: verifying)
            } throws: { error in
                guard case KVStoreError.unsafeFile(let refused, let reason) = error else { return false }
                return refused == path && reason.contains("symbolic link")
            }
        }
        #expect(throws: KVStoreError.self) { _ = try Store(copyFile: path) }
        #expect(try snapshots.verify().problems.map(\.kind) == [.notARegularFile])
    }

    /// The race the check closes: a co-tenant exchanges the snapshot with another valid store of the
    /// same size as fast as it can (`renameat2(RENAME_EXCHANGE)`). Before, the checksum was computed on
    /// one open of the path and LMDB opened the path again, so an open could pass the check on the real
    /// file and map the other one. Now every open either fails the check or shows the real contents.
    @Test func aSnapshotSwappedBetweenTheCheckAndTheOpenIsNeverMapped() throws {
        let (_, snapshots, entry) = try published("group.com.example.swapped", note: "good")
        let (_, other, otherEntry) = try published("group.com.example.decoy", note: "evil")
        try #require(otherEntry.size == entry.size)
        let decoy = snapshots.directory + "/decoy.mdb"
        try FileManager.default.copyItem(atPath: other.path(of: otherEntry), toPath: decoy)
        let swapper = PathSwapper(snapshots.path(of: entry), decoy)
        swapper.start()
        var (good, refused, evil) = (0, 0, 0)
        for _ in 0..<StressLevel.pick(short: 400, long: 4_000) {
            do {
                let store = try snapshots.open(generation: entry.generation)
                if try note(in: store) == "good" { good += 1 } else { evil += 1 }
            } catch is SnapshotError {
                refused += 1
            }
        }
        let swaps = swapper.stop()
        print("[security] snapshot swap race: \(swaps) swaps; opens showing the real snapshot \(good), refused by the check \(refused), showing the swapped-in file \(evil)")
        #expect(swaps > 100, "the swapper must really have been swapping")
        #expect(good > 0 && refused > 0, "both outcomes must have happened for the race to have been run")
        #expect(evil == 0)
    }

    /// `Notify/` replaced by a link after the container opened: a post refuses it and creates nothing
    /// behind it.
    @Test func aNotifyDirectorySwappedForALinkIsNotFollowedByAPost() throws {
        let container = try dir.container("group.com.example.notify")
        let outside = dir.path + "/outside"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try FileManager.default.removeItem(atPath: container.notifyDirectory)
        try FileManager.default.createSymbolicLink(atPath: container.notifyDirectory, withDestinationPath: outside)
        #expect(throws: KVStoreError.self) { try ChangeNotifier(container: container).post() }
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
    }
}
