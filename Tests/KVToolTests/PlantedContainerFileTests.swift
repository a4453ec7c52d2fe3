import Foundation
import Testing
import TestSupport
import KVStore
import SyncKit
import Workloads
#if canImport(Glibc)
import Glibc
#endif

/// Issue 47, finding 3: nothing a co-tenant plants where a container's file belongs hangs a process,
/// and nothing is written through a link. Each case plants one thing (a FIFO, a Unix socket, a character
/// device, a symbolic link to a victim file outside the container, or a regular file that another
/// process holds a lease on) at one path a library process opens, then runs the process that opens it
/// (kvtool, the widget; the feed publisher in this process, on a thread) with a deadline. Each must
/// return by its deadline; those that refuse say so in one line naming the path; the victim keeps its
/// bytes and mode.
///
/// On the code before the fix (its kvtool and checklist-widget run by this suite: 34 issues): a FIFO or a
/// device at `.sync.lock` or `Snapshots/.snapshots.lock` was opened and locked as if it were the file, a
/// FIFO at a `--token-file` hung `kvtool` until it was killed, a lease on either lock file held `kvtool
/// sync run` and `kvtool snapshot export` in `open()` (for the kernel's lease-break-time, 45 s), and most
/// refusals named neither the whole path nor what was there.
@Suite(.serialized) struct PlantedContainerFileTests {
    /// What is planted.
    enum Plant: String, CaseIterable, CustomStringConvertible {
        case fifo, socket, device, symlink, lease
        var description: String { rawValue }
    }

    /// A path a library process opens, and the process that opens it.
    enum Target: String, CaseIterable, CustomStringConvertible {
        case lockFile = "Store/lock.mdb"
        case dataFile = "Store/data.mdb"
        case syncLock = ".sync.lock"
        case notify = "Notify/changes"
        case snapshotsLock = "Snapshots/.snapshots.lock"
        case manifest = "Snapshots/manifest.json"
        case feed = "Snapshots/feeds/checklist.feed"
        case feedLock = "Snapshots/feeds/.checklist.lock"
        case sharedFile = "Files/note.txt"
        case tokenFile = "token"
        var description: String { rawValue }

        /// Whether the caller is `kvtool sync`, which exists only with the `PostgreSQL` trait (not in
        /// `swift build --disable-default-traits`, nor in CI's ThreadSanitizer run).
        var callerIsSync: Bool { self == .syncLock || self == .tokenFile }

        /// Whether the caller must refuse what is planted with an error naming the path (a notification
        /// post is best-effort: the commit succeeds, and the post is refused without a word).
        var refuses: Bool { self != .notify }

        /// Leases are taken on regular files that a process opens for writing (a read lease breaks only
        /// for a writer).
        var opensForWriting: Bool {
            switch self {
            case .lockFile, .dataFile, .syncLock, .notify, .snapshotsLock, .feedLock: true
            case .manifest, .feed, .sharedFile, .tokenFile: false
            }
        }
    }

    static let group = "group.com.example.planted"
    /// Each caller's deadline: far above what it takes (under a second in debug builds), far below the
    /// 45 s a lease holds an open that waits.
    static let deadline: TimeInterval = 15

    static var cases: [(Target, Plant)] {
        Target.allCases.flatMap { target in
            Plant.allCases.compactMap { plant -> (Target, Plant)? in
                if plant == .lease && !target.opensForWriting { return nil }
                #if !PostgreSQL
                if target.callerIsSync { return nil }
                #endif
                // The secret file is named by its user, and may be a link (a Kubernetes secret is one):
                // what is read is checked, not the path (SecretFileTests).
                if plant == .symlink && target == .tokenFile { return nil }
                return (target, plant)
            }
        }
    }

    @Test(.blockingWork, arguments: cases)
    func aPlantedFileNeverHangsItsCaller(_ target: Target, _ plant: Plant) throws {
        let dir = TemporaryDirectory()
        let root = dir.path + "/root"
        let outside = dir.path + "/outside"
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        let victim = outside + "/victim"
        try Data("victim\n".utf8).write(to: URL(fileURLWithPath: victim))
        chmod(victim, 0o644)
        try Self.fixture(root: root, target: target)
        let containerPath = root + "/" + Self.group
        let path = containerPath + "/" + target.rawValue
        unlink(path)

        var leaseHolder: BackgroundProcess?
        defer { leaseHolder?.kill() ; _ = leaseHolder?.wait(timeout: 10) }
        switch plant {
        case .fifo:
            #expect(mkfifo(path, 0o600) == 0, "mkfifo \(path): \(String(cString: strerror(errno)))")
        case .socket:
            try Self.bindSocket(at: path)
        case .device:
            // /dev/null's numbers: opening it has no effect on anything.
            guard mknod(path, S_IFCHR | 0o600, dev_t(0x103)) == 0 else {
                print("[planted] \(target) device: skipped, mknod failed: \(String(cString: strerror(errno)))")
                return
            }
        case .symlink:
            #expect(symlink(victim, path) == 0)
        case .lease:
            let fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
            #expect(fd >= 0)
            if target == .tokenFile { _ = write(fd, "t\n", 2) }
            close(fd)
            // A process of the file's owner takes a read lease and ignores SIGIO, the break notice: an
            // open for writing that waits for the lease waits for the kernel's lease-break-time.
            let holder = try BackgroundProcess("/usr/bin/python3", ["-c", """
                import fcntl, os, signal, sys, time
                signal.signal(signal.SIGIO, signal.SIG_IGN)
                fd = os.open(sys.argv[1], os.O_RDONLY)
                fcntl.fcntl(fd, 1024, fcntl.F_RDLCK)  # F_SETLEASE
                print("leased", flush=True)
                time.sleep(60)
                """, path])
            leaseHolder = holder
            guard holder.waitForLine(timeout: 20, where: { $0 == "leased" }) != nil else {
                Issue.record("the lease holder did not take its lease: \(holder.wait(timeout: 5).stderr)")
                return
            }
        }

        let started = ContinuousClock.now
        let outcome = try Self.call(target, root: root)
        let took = ContinuousClock.now - started
        print("[planted] \(target) \(plant): \(outcome.finished ? "returned" : "HUNG") in \(took), status \(outcome.status): \(outcome.message.prefix(200))")
        #expect(outcome.finished, "\(target) with a \(plant): the caller did not return within \(Int(Self.deadline)) s")
        if outcome.finished && target.refuses {
            let lines = outcome.message.split(separator: "\n", omittingEmptySubsequences: true)
            #expect(outcome.status != 0, "\(target) with a \(plant) was used as the file: \(outcome.message)")
            // `kvtool files` names a file by the path its user gave; every other caller by its whole path.
            let named = target == .sharedFile ? "note.txt" : path
            #expect(lines.count == 1 && outcome.message.contains(named),
                    "\(target) with a \(plant): not one line naming \(named): \(outcome.message)")
            #expect(outcome.message.contains(Self.word(plant)),
                    "\(target) with a \(plant): the line does not say what is there (\(Self.word(plant))): \(outcome.message)")
        }
        // Nothing went through the link: the victim keeps its bytes and mode, and nothing appeared beside it.
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "victim\n")
        var st = stat()
        #expect(lstat(victim, &st) == 0 && st.st_mode & 0o7777 == 0o644)
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside) == ["victim"])
        // What was planted is still what is there: nothing replaced or removed it on the way.
        #expect(lstat(path, &st) == 0 && st.st_mode & S_IFMT == Self.type(plant), "\(path) was replaced")
    }

    /// The word the refusal must use for what is planted.
    static func word(_ plant: Plant) -> String {
        switch plant {
        case .fifo: "FIFO"
        case .socket: "socket"
        case .device: "device"
        case .symlink: "symbolic link"
        case .lease: "lease"
        }
    }

    static func type(_ plant: Plant) -> mode_t {
        switch plant {
        case .fifo: S_IFIFO
        case .socket: S_IFSOCK
        case .device: S_IFCHR
        case .symlink: S_IFLNK
        case .lease: S_IFREG
        }
    }

    /// A container with a store, a published snapshot and feed, a shared file, and replication
    /// declared (for `.sync.lock`), all made by this process before anything is planted.
    static func fixture(root: String, target: Target) throws {
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let container = try SharedContainer(groupIdentifier: group, root: root)
        let scores = try container.store.collection("scores", key: String.self, value: Int.self)
        try scores.put(42, forKey: "alice")
        try SharedFiles(directory: container.layout.files).write(Data("note\n".utf8), to: "note.txt")
        switch target {
        case .manifest, .snapshotsLock:
            _ = try Snapshots(container: container).export(from: container.store)
        case .feed, .feedLock:
            let app = try ChecklistWidgetFlow.App(container: container)
            _ = try app.save(ChecklistDataset.records(days: 3))
            _ = try app.publish()
        default:
            break
        }
        if target == .syncLock {
            let r = try run(productsDirectory() + "/kvtool", ["sync", "enable", "scores", "--root", root, "--group", group])
            #expect(r.status == 0, "sync enable: \(r.stderr)")
        }
    }

    struct Outcome {
        var finished: Bool
        var status: Int32
        var message: String
    }

    /// Runs the process (or, for the feed's lock, the publisher on a thread) that opens `target`.
    static func call(_ target: Target, root: String) throws -> Outcome {
        let kvtool = productsDirectory() + "/kvtool"
        let scope = ["--root", root, "--group", group]
        let arguments: [String]
        var executable = kvtool
        switch target {
        case .lockFile:
            arguments = ["get", "scores", "alice"] + scope
        case .dataFile:
            // A writer: a read lease on data.mdb would not stop a reader (nor should it).
            arguments = ["put", "scores", "bob", "7"] + scope
        case .syncLock:
            // Ownership is taken before the server is reached: port 1 refuses at once.
            arguments = ["sync", "run", "--once", "--give-up-after", "1", "--server", "postgres://nobody@127.0.0.1:1/none"] + scope
        case .notify:
            arguments = ["put", "scores", "bob", "7"] + scope
        case .snapshotsLock:
            arguments = ["snapshot", "export"] + scope
        case .manifest:
            arguments = ["snapshot", "list"] + scope
        case .feed:
            executable = productsDirectory() + "/checklist-widget"
            arguments = scope
        case .sharedFile:
            arguments = ["files", "cat", "note.txt"] + scope
        case .tokenFile:
            arguments = ["sync", "run", "--once", "--give-up-after", "1", "--server", "http://127.0.0.1:1",
                         "--token-file", root + "/" + group + "/token"] + scope
        case .feedLock:
            return try publishOnAThread(root: root)
        }
        let result = try runWithDeadline(executable, arguments)
        return result
    }

    /// Runs a process; a process still running at the deadline is killed and reported as not finished
    /// (without failing the test here: the caller's expectation names the case).
    static func runWithDeadline(_ executable: String, _ arguments: [String]) throws -> Outcome {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let err = Pipe()
        process.standardOutput = FileHandle.nullDevice
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let pid = process.processIdentifier
        let done = DispatchSemaphore(value: 0)
        let errorText = Locked(Data())
        let reader = Thread {
            errorText.withLock { $0 = err.fileHandleForReading.readDataToEndOfFile() }
            done.signal()
        }
        reader.start()
        var finished = true
        if done.wait(timeout: .now() + deadline) == .timedOut {
            finished = false
            kill(pid, SIGKILL)
            done.wait()
        }
        process.waitUntilExit()
        return Outcome(finished: finished, status: process.terminationStatus,
                       message: String(decoding: errorText.withLock { $0 }, as: UTF8.self))
    }

    /// Publishes the checklist feed on a thread, waiting at most the deadline. A thread still blocked
    /// then is left to the lease holder's end (its kill releases the lease, and the open returns).
    static func publishOnAThread(root: String) throws -> Outcome {
        let container = try SharedContainer(groupIdentifier: group, root: root)
        let app = try ChecklistWidgetFlow.App(container: container)
        let result = Locked<Outcome?>(nil)
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            do {
                let generation = try app.publish()
                result.withLock { $0 = Outcome(finished: true, status: 0, message: "published generation \(generation)") }
            } catch {
                result.withLock { $0 = Outcome(finished: true, status: 1, message: "\(error)") }
            }
            done.signal()
        }
        thread.start()
        guard done.wait(timeout: .now() + deadline) == .success else {
            return Outcome(finished: false, status: -1, message: "")
        }
        return result.withLock { $0 } ?? Outcome(finished: false, status: -1, message: "")
    }

    /// Leaves a Unix socket's name at `path` (the socket itself is closed: nothing listens).
    static func bindSocket(at path: String) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        #expect(fd >= 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        try #require(bytes.count < MemoryLayout.size(ofValue: address.sun_path), "socket path too long: \(path)")
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in bytes.enumerated() { raw[i] = b }
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        #expect(rc == 0, "bind \(path): \(String(cString: strerror(errno)))")
    }
}
