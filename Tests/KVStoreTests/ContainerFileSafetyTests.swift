import Foundation
import KVStore
import Testing
import TestSupport
#if canImport(Glibc)
import Glibc
#endif

/// What a co-tenant (any process that can write the container: a widget, an extension, another member
/// of the group) can plant in a container's own files, and what opening the container then does: a
/// symbolic link or a hard link is never followed, a foreign owner is refused, a wrong mode is
/// repaired by the owner or refused, and the planted link's target is left untouched, bytes and mode.
///
/// Each container here is opened for the first time in this process (the environment registry would
/// otherwise hand back an environment opened before the link was planted), or in a fresh process.
@Suite struct ContainerFileSafetyTests {
    let dir = TemporaryDirectory()
    let group = "group.com.example.planted"

    var containerPath: String { dir.path + "/" + group }
    var storePath: String { containerPath + "/Store" }

    /// A file outside the container that a hostile link points at: its bytes and mode must never change.
    struct Victim {
        let path: String
        let bytes: Data
        let mode: mode_t

        init(_ path: String, mode: mode_t = 0o640) throws {
            self.path = path
            bytes = Data("precious: another user's private file\n".utf8)
            self.mode = mode
            try bytes.write(to: URL(fileURLWithPath: path))
            chmod(path, mode)
        }

        func expectUntouched(_ comment: Comment? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
            #expect((try? Data(contentsOf: URL(fileURLWithPath: path))) == bytes, comment, sourceLocation: sourceLocation)
            #expect(fileMode(path) == mode, comment, sourceLocation: sourceLocation)
        }
    }

    /// Creates the container's directories by hand (as another process would have), without opening
    /// its store in this process.
    func layout(sharing: SharingMode = .privateToUser) throws {
        for sub in ["", "/Store", "/Files", "/Snapshots", "/Notify"] {
            try FileManager.default.createDirectory(atPath: containerPath + sub, withIntermediateDirectories: true)
            chmod(containerPath + sub, sharing.directoryMode)
        }
    }

    /// A store with one value, written by another process (`kvtool put`), so that this process has
    /// never opened it.
    func populatedByAnotherProcess() throws {
        try populatedByAnotherProcessIn(.privateToUser)
    }

    func open(_ sharing: SharingMode = .privateToUser, readOnly: Bool = false) throws -> SharedContainer {
        var options = SharedContainer.Options()
        options.sharing = sharing
        options.readOnly = readOnly
        return try SharedContainer(groupIdentifier: group, root: dir.path, options: options)
    }

    func expectRefused(_ path: String, _ body: () throws -> Void, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(sourceLocation: sourceLocation) { try body() } throws: { error in
            guard case KVStoreError.unsafeFile(let refused, _) = error else { return false }
            return refused.hasSuffix(String(path.dropFirst(dir.path.count)))
        }
    }

    // MARK: - Planted symbolic links

    /// The bug of the issue: a link at `Store/lock.mdb` made LMDB overwrite its target with the lock
    /// table, and in group-shared mode the library then `chmod`ed the target to 0660. `data.mdb` the
    /// same way.
    @Test(.blockingWork, arguments: SharingMode.allCases, ["lock.mdb", "data.mdb"])
    func aSymbolicLinkAtAStoreFileIsRefusedAndItsTargetLeftUntouched(sharing: SharingMode, file: String) throws {
        try layout(sharing: sharing)
        let victim = try Victim(dir.path + "/victim")
        try FileManager.default.createSymbolicLink(atPath: storePath + "/" + file, withDestinationPath: victim.path)
        expectRefused(storePath + "/" + file) { _ = try open(sharing) }
        victim.expectUntouched()
        let other = file == "lock.mdb" ? "data.mdb" : "lock.mdb"
        #expect(!FileManager.default.fileExists(atPath: storePath + "/" + other) || fileSize(storePath + "/" + other) == 0,
                "nothing was written to the store's other file")
    }

    /// The issue's reproduction as a user meets it: another process plants the link in a container
    /// that exists, then `kvtool defaults write` runs.
    @Test(.blockingWork) func kvtoolRefusesAPlantedLockFileLinkWithOneLineAndExit74() throws {
        try populatedByAnotherProcess()
        let victim = try Victim(dir.path + "/victim")
        try FileManager.default.removeItem(atPath: storePath + "/lock.mdb")
        try FileManager.default.createSymbolicLink(atPath: storePath + "/lock.mdb", withDestinationPath: victim.path)
        let result = try run(productsDirectory() + "/kvtool", ["defaults", "write", "--root", dir.path, "--group", group, "selectedTrainerId", "abc"])
        #expect(result.status == 74, "\(result.stderr)")
        #expect(result.stderr.hasPrefix("kvtool: error: refusing \(storePath)/lock.mdb: it is a symbolic link"), "\(result.stderr)")
        #expect(result.stderr.split(separator: "\n").count == 1)
        victim.expectUntouched()
    }

    @Test(.blockingWork) func aStoreDirectoryThatIsASymbolicLinkIsRefused() throws {
        try layout()
        let outside = dir.path + "/outside"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try FileManager.default.removeItem(atPath: storePath)
        try FileManager.default.createSymbolicLink(atPath: storePath, withDestinationPath: outside)
        #expect(throws: KVStoreError.self) { _ = try open() }
        #expect(throws: KVStoreError.self) { _ = try Store(directory: storePath) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
    }

    /// `Notify/` swapped for a link after the container opened: the one helper that creates the
    /// container's directories afterwards (`Snapshots/` and `feeds/` are made through it) refuses the
    /// link and creates nothing behind it. SyncKit's `SnapshotOpenSafetyTests` covers a post.
    @Test(.blockingWork) func makingADirectoryRefusesALinkInItsPlace() throws {
        try layout()
        let container = try open()
        let outside = dir.path + "/outside"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        let mode = fileMode(outside)
        try FileManager.default.removeItem(atPath: container.notifyDirectory)
        try FileManager.default.createSymbolicLink(atPath: container.notifyDirectory, withDestinationPath: outside)
        #expect(throws: KVStoreError.self) { try SharingMode.groupShared.makeDirectory(container.notifyDirectory) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside).isEmpty)
        #expect(fileMode(outside) == mode, "the link's target keeps its mode (no chmod to 2770 through it)")
    }

    // MARK: - Hard links, owners, modes

    @Test(.blockingWork) func aHardLinkAtTheLockFileIsRefusedAndItsTargetLeftUntouched() throws {
        try layout()
        let victim = try Victim(dir.path + "/victim", mode: 0o600)
        #expect(link(victim.path, storePath + "/lock.mdb") == 0)
        expectRefused(storePath + "/lock.mdb") { _ = try open() }
        victim.expectUntouched()
    }

    @Test(.blockingWork) func aHardLinkAtTheDataFileIsRefused() throws {
        try populatedByAnotherProcess()
        let copy = dir.path + "/second-name"
        #expect(link(storePath + "/data.mdb", copy) == 0)
        expectRefused(storePath + "/data.mdb") { _ = try open() }
    }

    /// A file wider than the mode, owned by this user: the owner repairs it with `fchmod`.
    @Test(.blockingWork, arguments: SharingMode.allCases)
    func aWorldWritableStoreFileOfThisUserIsRepaired(sharing: SharingMode) throws {
        try layout(sharing: sharing)
        try populatedByAnotherProcessIn(sharing)
        chmod(storePath + "/data.mdb", 0o666)
        chmod(storePath + "/lock.mdb", 0o606)
        chmod(storePath, 0o777)
        let container = try open(sharing)
        #expect(try container.store.collection("notes", key: String.self, value: String.self).get("a") == "1")
        #expect(fileMode(storePath + "/data.mdb") == sharing.fileMode)
        #expect(fileMode(storePath + "/lock.mdb") == sharing.fileMode)
        #expect(fileMode(storePath) == sharing.directoryMode)
    }

    func populatedByAnotherProcessIn(_ sharing: SharingMode) throws {
        let put = try helper(["container-put", dir.path, group, sharing == .groupShared ? "groupShared" : "privateToUser"])
        try #require(put.status == 0, "\(put.stderr)")
    }

    /// Ownership needs a second user: as root, the test gives files to `nobody` (65534). Not root and
    /// not in CI: skipped with a message; in CI (where tests run as root) it must run.
    func requireRoot() throws -> Bool {
        if geteuid() == 0 { return true }
        let ci = ProcessInfo.processInfo.environment["CI"].map { ["1", "true"].contains($0.lowercased()) } ?? false
        #expect(!ci, "ownership tests need root to give files to another user, and CI runs as root")
        print("[security] skipped: ownership tests need root")
        return false
    }

    @Test(.blockingWork) func aStoreFileOwnedByAnotherUserIsRefusedInAPrivateContainer() throws {
        guard try requireRoot() else { return }
        try populatedByAnotherProcess()
        #expect(chown(storePath + "/data.mdb", 65534, 65534) == 0)
        let before = try Data(contentsOf: URL(fileURLWithPath: storePath + "/data.mdb"))
        expectRefused(storePath + "/data.mdb") { _ = try open() }
        #expect(try Data(contentsOf: URL(fileURLWithPath: storePath + "/data.mdb")) == before)
        #expect(fileMode(storePath + "/data.mdb") == 0o600)
    }

    @Test(.blockingWork) func aContainerDirectoryOwnedByAnotherUserIsRefusedInPrivateMode() throws {
        guard try requireRoot() else { return }
        try layout()
        #expect(chown(containerPath, 65534, 65534) == 0)
        #expect(throws: KVStoreError.self) { _ = try open() }
    }

    /// Group-shared: files of other members are fine, but one that the group cannot write (a lock file
    /// `0640` of another member) or that others can write (`0666`) cannot be repaired by this process,
    /// so it is refused, naming the owner, and left as it was.
    @Test(.blockingWork, arguments: [mode_t(0o640), mode_t(0o666)])
    func aGroupSharedLockFileOfAnotherMemberWithTheWrongModeIsRefused(mode: mode_t) throws {
        guard try requireRoot() else { return }
        try layout(sharing: .groupShared)
        try populatedByAnotherProcessIn(.groupShared)
        let gid = try FilePolicyProbe.group(of: containerPath)
        let lock = storePath + "/lock.mdb"
        let lockBytes = try Data(contentsOf: URL(fileURLWithPath: lock))
        #expect(chown(lock, 65534, gid) == 0)
        #expect(chmod(lock, mode) == 0)
        // Root may fchmod anything; drop to another member of the group for the open, in a child
        // process (which must be able to reach the temporary directory through its group).
        chmod(dir.path, 0o750)
        #expect(chown(dir.path, 0, gid) == 0)
        let result = try run("/usr/bin/setpriv", ["--reuid=65533", "--regid=\(gid)", "--clear-groups",
                                                  productsDirectory() + "/kvtest-helper", "store-count", dir.path, group, storePath, String(64 << 30), "660"])
        #expect(result.status == 1)
        #expect(result.stderr.contains("refusing \(lock): its mode is 0\(String(mode, radix: 8))"), "\(result.stderr)")
        #expect(result.stderr.contains("only its owner (uid 65534)"), "\(result.stderr)")
        #expect(fileMode(lock) == mode)
        #expect(try Data(contentsOf: URL(fileURLWithPath: lock)) == lockBytes)
    }

    @Test(.blockingWork) func aGroupSharedFileOfAnotherGroupIsRefused() throws {
        guard try requireRoot() else { return }
        try layout(sharing: .groupShared)
        let lock = storePath + "/lock.mdb"
        #expect(FileManager.default.createFile(atPath: lock, contents: nil))
        let gid = try FilePolicyProbe.group(of: containerPath)
        #expect(chown(lock, 0, gid == 65534 ? 65533 : 65534) == 0)
        chmod(lock, 0o660)
        expectRefused(lock) { _ = try open(.groupShared) }
    }

    // MARK: - Races

    /// A co-tenant exchanges `Store/lock.mdb` with a link to a victim file as fast as it can
    /// (`renameat2(RENAME_EXCHANGE)`), while new processes open the store again and again: each open
    /// either succeeds on the real lock file or is refused, and the victim is never written. Before the
    /// fix, LMDB's open by path followed the link whenever it was there at that moment.
    @Test(.blockingWork) func aLockFileSwappedForALinkWhileProcessesOpenTheStoreNeverReachesTheLinksTarget() throws {
        try populatedByAnotherProcess()
        let victim = try Victim(dir.path + "/victim", mode: 0o600)
        let decoy = storePath + "/decoy"
        try FileManager.default.createSymbolicLink(atPath: decoy, withDestinationPath: victim.path)
        let swapper = PathSwapper(storePath + "/lock.mdb", decoy)
        swapper.start()
        var (opened, refused, other) = (0, 0, [String]())
        for _ in 0..<StressLevel.pick(short: 40, long: 400) {
            let result = try run(productsDirectory() + "/kvtool", ["get", "--root", dir.path, "--group", group, "notes", "a"])
            if result.status == 0 { opened += 1 } else if result.stderr.contains("refusing") { refused += 1 } else { other.append(result.stderr) }
        }
        let swaps = swapper.stop()
        print("[security] lock-file swap race: \(swaps) swaps, \(opened) opens succeeded, \(refused) refused, \(other.count) other errors")
        #expect(swaps > 100, "the swapper must really have been swapping")
        #expect(opened + refused > 0)
        #expect(other.isEmpty, "\(other.prefix(3))")
        victim.expectUntouched()
    }

    // MARK: - What one process can impose on the others

    /// Another process recorded a 1 TiB map (a hostile or buggy one can write any size into the meta
    /// page): a process whose `maxMapSize` is smaller refuses to map it, with a typed error.
    @Test(.blockingWork) func aRecordedMapSizeOverMaxMapSizeIsRefused() throws {
        let store = dir.path + "/big"
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        let grow = try helper(["store-put", dir.path, group, store, String(1 << 40), "126", "4"])
        try #require(grow.status == 0, "\(grow.stderr)")
        let small = try helper(["store-count", dir.path, group, store, String(64 << 20)])
        #expect(small.status == 1)
        #expect(small.stderr.contains("records a map of 1099511627776 bytes, over this process's limit of 67108864 bytes"), "\(small.stderr)")
        let large = try helper(["store-count", dir.path, group, store, String(2 << 40)])
        #expect(large.stdout == "4\n", "\(large.stderr)")
    }

    /// The same while this process has the store open: another process grows the data past this
    /// process's map and records 1 TiB; this process's next read (LMDB's `MDB_MAP_RESIZED`) refuses
    /// to adopt it, with the typed error, every time, instead of mapping 1 TiB.
    @Test(.blockingWork) func aRecordedMapSizeOverMaxMapSizeIsRefusedWhenAnOpenProcessWouldAdoptIt() throws {
        let directory = dir.path + "/resized"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let first = try helper(["store-put", dir.path, group, directory, String(1 << 20), "126", "4"])
        try #require(first.status == 0, "\(first.stderr)")
        var options = Store.Options()
        options.mapSize = 1 << 20
        options.maxMapSize = 64 << 20
        let store = try Store(directory: directory, options: options)
        let items = try store.collection("items", key: Int.self, value: [UInt8].self)
        #expect(try items.count() == 4)
        let grow = try helper(["store-put", dir.path, group, directory, String(1 << 40), "126", "4000"])
        try #require(grow.status == 0, "\(grow.stderr)")
        for _ in 0..<2 {
            #expect(throws: KVStoreError.mapSizeOverLimit(path: store.directory, recorded: 1 << 40, limit: 64 << 20)) {
                _ = try items.count()
            }
        }
    }

    /// A `data.mdb` that ends before pages its newest transaction reaches (truncated by another
    /// process) is refused at open, instead of faulting (SIGBUS) on the first read of a missing page.
    @Test(.blockingWork) func aTruncatedDataFileIsATypedErrorAtOpen() throws {
        let store = dir.path + "/cut"
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        let put = try helper(["store-put", dir.path, group, store, String(16 << 20), "126", "400"])
        try #require(put.status == 0, "\(put.stderr)")
        #expect(truncate(store + "/data.mdb", off_t(4 * 4096)) == 0)
        let read = try helper(["store-count", dir.path, group, store, String(64 << 30)])
        #expect(read.status == 1)
        // One line: the file, its size, and the lowest page the newest transaction reaches that is gone.
        let words = read.stderr.split(separator: " ")
        let page = words.firstIndex(of: "page").flatMap { Int(words[$0 + 1].dropLast()) }
        #expect(read.stderr.contains("/cut/data.mdb was truncated: it is 16384 bytes, but its newest transaction reaches page "), "\(read.stderr)")
        #expect(page.map { $0 >= 4 && read.stderr.hasSuffix(", which starts at byte \($0 * 4096)\n") } == true, "\(read.stderr)")
    }

    /// What happens to a process that is reading when another one truncates `data.mdb` under it:
    /// recorded, not prevented (nothing can stop a process with write access to the file). It dies of
    /// SIGBUS on its next access to a missing page, or reads on if it touches only pages still there.
    @Test(.blockingWork) func truncatingTheDataFileUnderALiveReaderIsRecorded() throws {
        let store = dir.path + "/live"
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        let put = try helper(["store-put", dir.path, group, store, String(16 << 20), "126", "400"])
        try #require(put.status == 0, "\(put.stderr)")
        // Without Swift's crash backtracer: the reader may die of SIGBUS, and the backtracer it then
        // starts inherits its descriptors, Foundation's watch of its exit among them. Once it hung past
        // its own 30 s timeout, and the reader, dead, was never seen to exit (the run hung here).
        let reader = try BackgroundProcess(productsDirectory() + "/kvtest-helper", ["store-read-loop", dir.path, group, store],
                                           environment: ["SWIFT_BACKTRACE": "enable=no"])
        defer { reader.kill() }
        try #require(reader.waitForLine(timeout: 30) { $0.hasPrefix("reading") } != nil)
        #expect(truncate(store + "/data.mdb", off_t(4 * 4096)) == 0)
        var waited = 0
        while reader.process.isRunning && waited < 50 { usleep(100_000); waited += 1 }
        let running = reader.process.isRunning
        if running { reader.kill() }
        let (status, lines, _) = reader.wait()
        let outcome = running ? "still reading after 5 s" : reader.process.terminationReason == .uncaughtSignal ? "killed by signal \(status)" : "exited \(status): \(lines.last ?? "")"
        print("[security] data.mdb truncated under a live reader: \(outcome)")
        #expect(running || status != 0, "a reader whose file was cut cannot carry on normally without noticing")
    }

    /// Every reader slot taken (a lock table of 3 slots, made by the first process to open it and
    /// held by helper processes): a read that needs a new slot is a typed `readersFull` error, in a
    /// process that was already open and in a new one; once the holders are gone (killed, so their
    /// slots are stale), the same process reads again without reopening anything: on `readersFull`,
    /// KVStore clears the slots of dead processes and tries once more.
    @Test(.blockingWork) func aFullReaderTableIsATypedErrorAndTheProcessRecovers() throws {
        let store = dir.path + "/readers"
        try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: true)
        let put = try helper(["store-put", dir.path, group, store, String(16 << 20), "3", "4"])
        try #require(put.status == 0, "\(put.stderr)")
        let reaper = ProcessReaper()
        defer { reaper.stopAll() }
        // The first holder sizes the lock table (3 slots) and keeps it alive; the retrier then keeps one
        // slot of its own (its pooled read transaction), and a second holder takes the last one.
        let first = try reaper.helper(["store-hold-read", dir.path, group, store, "3"])
        try #require(first.waitForLine(timeout: 30) { $0 == "reading" } != nil)
        let triggers = dir.path + "/triggers"
        try FileManager.default.createDirectory(atPath: triggers, withIntermediateDirectories: true)
        let retrier = try reaper.helper(["store-readers-retry", dir.path, group, store, triggers])
        try #require(retrier.waitForLine(timeout: 30) { $0 == "open" } != nil)
        let second = try reaper.helper(["store-hold-read", dir.path, group, store, "3"])
        try #require(second.waitForLine(timeout: 30) { $0 == "reading" } != nil)

        let fresh = try helper(["store-count", dir.path, group, store, String(64 << 30)])
        #expect(fresh.status == 1)
        #expect(fresh.stderr.contains("MDB_READERS_FULL"), "\(fresh.stderr)")
        #expect(FileManager.default.createFile(atPath: triggers + "/1", contents: nil))
        let whenFull = retrier.waitForLine(timeout: 30) { $0.hasPrefix("1 ") }
        #expect(whenFull?.contains("MDB_READERS_FULL") == true, "\(whenFull ?? "no answer")")

        for holder in [first, second] { holder.kill(SIGKILL); _ = holder.wait() }
        #expect(FileManager.default.createFile(atPath: triggers + "/2", contents: nil))
        let afterwards = retrier.waitForLine(timeout: 30) { $0.hasPrefix("2 ") }
        #expect(afterwards == "2 ok 4", "\(afterwards ?? "no answer")")
    }
}

/// The group of a path, for the group-shared tests.
enum FilePolicyProbe {
    static func group(of path: String) throws -> gid_t {
        var st = stat()
        guard stat(path, &st) == 0 else { throw KVStoreError.io(operation: "stat", path: path, errno: errno) }
        return st.st_gid
    }
}

func fileMode(_ path: String) -> mode_t? {
    var st = stat()
    return lstat(path, &st) == 0 ? st.st_mode & 0o7777 : nil
}

func fileSize(_ path: String) -> Int {
    var st = stat()
    return lstat(path, &st) == 0 ? Int(st.st_size) : -1
}
