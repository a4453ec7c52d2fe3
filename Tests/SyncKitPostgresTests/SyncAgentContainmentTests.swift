#if PostgreSQL
import Foundation
import KVStore
import SyncKit
import SyncKitPostgres
import TestSupport
import SyncTestSupport
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// What a co-tenant of the container can do to the sync agent (issue 47), tried with real `kvtool`
/// processes: a FIFO, a socket, a device node or a link planted at the agent's log or at a
/// registration never hangs `kvtool sync request --wait 2` past its deadline nor leaves a process
/// behind (finding 3); a `/bin/sh` planted as the container's `.sync-agent` is never run, and the
/// credential is never in the container (finding 4). Each `kvtool` has its own configuration directory
/// (`XDG_CONFIG_HOME`, where registrations are kept) and a timeout; its output goes to files, so that
/// a process left behind holding them cannot hang the test.
@Suite(.serialized) struct SyncAgentContainmentTests {
    static let deadServer = "postgres://u@127.0.0.1:1/db"

    struct RunFailure: Error, CustomStringConvertible { var description: String }

    /// What a bounded `kvtool` run did.
    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
        var timedOut: Bool
        var seconds: Double
        var lines: [String] { stdout.split(separator: "\n").map(String.init) }
    }

    /// One device, its configuration directory, and a program to register that leaves a mark when run.
    final class Setup: @unchecked Sendable {
        let device: Device
        let config: String
        let registeredMark: String
        let program: String
        init(_ name: String) throws {
            // A short group: the log's path must fit a Unix socket's address (108 bytes).
            device = try Device(group: "group.t.\(name)")
            config = device.directory.path + "/config"
            registeredMark = device.directory.path + "/registered-ran"
            program = device.directory.path + "/registered.sh"
            try "#!/bin/sh\ntouch '\(registeredMark)'\n".write(toFile: program, atomically: true, encoding: .utf8)
            chmod(program, 0o755)
            try device.put("pending", "k")
        }
        var log: String { device.container.path + "/" + SyncAgentRegistration.logName }
        var legacy: String { device.container.path + "/" + SyncAgentRegistration.fileName }
        /// The registration files kept outside the container (one once registered).
        var registered: [String] {
            let directory = config + "/kvstore/sync-agents"
            return ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? [])
                .filter { !$0.hasPrefix(".") }.map { directory + "/" + $0 }
        }

        /// `kvtool ARGS --root ROOT --group GROUP` with this setup's `XDG_CONFIG_HOME`, killed at `timeout`.
        ///
        /// Started with `posix_spawn` and reaped with `waitpid`, its output in files: Foundation's
        /// `Process` learns of an exit through a socket its child inherits, so a child of `kvtool` stuck
        /// before its `exec` (what a FIFO at the log did) kept it from ever seeing the exit.
        func kvtool(_ arguments: [String], timeout: Double = BuildScale.seconds(60)) throws -> Run {
            let out = device.directory.path + "/stdout-\(UUID().uuidString)", err = out + ".err"
            let outFD = open(out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            let errFD = open(err, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            let nullFD = open("/dev/null", O_RDONLY | O_CLOEXEC)
            defer { close(outFD); close(errFD); close(nullFD) }
            guard outFD >= 0, errFD >= 0, nullFD >= 0 else { throw RunFailure(description: "cannot open the output files: errno \(errno)") }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_adddup2(&actions, nullFD, 0)
            posix_spawn_file_actions_adddup2(&actions, outFD, 1)
            posix_spawn_file_actions_adddup2(&actions, errFD, 2)
            let executable = productsDirectory() + "/kvtool"
            let argv = ([executable] + arguments + ["--root", device.directory.path, "--group", device.group]).map { strdup($0) } + [nil]
            let environment = ProcessInfo.processInfo.environment.merging(["XDG_CONFIG_HOME": config]) { _, new in new }
            let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
            defer { for pointer in argv + envp { free(pointer) } }
            let started = ContinuousClock.now
            var pid = pid_t()
            let code = posix_spawn(&pid, executable, &actions, nil, argv, envp)
            guard code == 0 else { throw RunFailure(description: "cannot start kvtool: errno \(code)") }
            var status: Int32 = 0
            var timedOut = false
            while waitpid(pid, &status, WNOHANG) == 0 {
                if ContinuousClock.now - started > .milliseconds(Int64(timeout * 1000)) {
                    timedOut = true
                    kill(pid, SIGKILL)
                    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
                    break
                }
                usleep(10_000)
            }
            let elapsed = ContinuousClock.now - started
            let exit = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            return Run(status: exit, stdout: (try? String(contentsOfFile: out, encoding: .utf8)) ?? "",
                       stderr: (try? String(contentsOfFile: err, encoding: .utf8)) ?? "", timedOut: timedOut,
                       seconds: Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18)
        }

        /// Processes still running whose command line names this device's directory (a request's child
        /// stuck before its `exec`, an agent): each is killed (this test started it), and listed.
        func leftovers() -> [String] {
            var found: [String] = []
            let own = getpid()
            for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
                guard let pid = Int32(name), pid != own,
                      let data = FileManager.default.contents(atPath: "/proc/\(name)/cmdline") else { continue }
                let command = String(decoding: data.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self)
                guard command.contains(device.directory.path) else { continue }
                found.append("pid \(pid): \(command)")
                kill(pid, SIGKILL)
            }
            return found
        }
    }

    /// Makes `kind` at `path` (the path is free); `nil` when made, else why it could not be.
    static func plant(_ kind: String, at path: String, victim: String) -> String? {
        switch kind {
        case "FIFO":
            return mkfifo(path, 0o600) == 0 ? nil : "mkfifo: \(String(cString: strerror(errno)))"
        case "socket":
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(fd) }
            var address = sockaddr_un()
            address.sun_family = sa_family_t(AF_UNIX)
            let bytes = Array(path.utf8)
            guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return "the path is too long for a socket" }
            withUnsafeMutableBytes(of: &address.sun_path) { buffer in
                for (index, byte) in bytes.enumerated() { buffer[index] = byte }
            }
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
            }
            return bound == 0 ? nil : "bind: \(String(cString: strerror(errno)))"
        case "device":
            // The character device 1:3 (what /dev/null is); only root may make one.
            return mknod(path, S_IFCHR | 0o600, 0x103) == 0 ? nil : "mknod (root only): \(String(cString: strerror(errno)))"
        default:
            return symlink(victim, path) == 0 ? nil : "symlink: \(String(cString: strerror(errno)))"
        }
    }

    static let kinds = ["FIFO", "socket", "device", "link"]

    /// Plants each kind at `path` in turn and runs `kvtool sync request --wait 2`: it returns by its
    /// deadline, exit 69, one line naming `path`; nothing is left running, nothing written through
    /// the link, nothing started. Returns the seconds each took.
    static func expectEachPlantRefused(_ setup: Setup, at path: String, mark: String,
                                       sourceLocation: SourceLocation = #_sourceLocation) throws -> [String] {
        let victim = setup.device.directory.path + "/victim"
        var figures: [String] = []
        for kind in kinds {
            try "untouched\n".write(toFile: victim, atomically: true, encoding: .utf8)
            unlink(path)
            if let reason = plant(kind, at: path, victim: victim) {
                print("SyncAgentContainmentTests: no \(kind) planted at \(path), that case is skipped: \(reason)")
                continue
            }
            // A hung request is killed at this bound (and its child with it, below): the test fails then.
            let run = try setup.kvtool(["sync", "request", "--wait", "2"], timeout: BuildScale.seconds(30))
            let left = setup.leftovers()
            figures.append("\(kind) \(String(format: "%.2f", run.seconds)) s")
            #expect(!run.timedOut, "a \(kind) at \(path): the request was still running after \(run.seconds) s", sourceLocation: sourceLocation)
            #expect(left.isEmpty, "a \(kind) at \(path) left processes behind: \(left)", sourceLocation: sourceLocation)
            #expect(run.status == 69, "a \(kind) at \(path): exit \(run.status): \(run.stdout)\(run.stderr)", sourceLocation: sourceLocation)
            #expect(run.lines.count == 1 && run.lines.first?.contains(path) == true,
                    "a \(kind) at \(path): the answer is not one line naming it: \(run.stdout)\(run.stderr)", sourceLocation: sourceLocation)
            #expect(try String(contentsOfFile: victim, encoding: .utf8) == "untouched\n", "written through a link at \(path)",
                    sourceLocation: sourceLocation)
            #expect(!FileManager.default.fileExists(atPath: mark), "a \(kind) at \(path): the agent was started", sourceLocation: sourceLocation)
            unlink(path)
        }
        return figures
    }

    // MARK: - Finding 3: nothing planted hangs a request

    @Test(.blockingWork) func aFIFOSocketDeviceOrLinkAtTheAgentsLogNeverHangsARequest() throws {
        let setup = try Setup("log")
        let set = try setup.kvtool(["sync", "agent", "set", "--server", Self.deadServer, "--program", setup.program])
        #expect(set.status == 0, "\(set.stderr)")
        let figures = try Self.expectEachPlantRefused(setup, at: setup.log, mark: setup.registeredMark)
        print("SyncAgentContainmentTests: sync request --wait 2 with each plant at .sync-agent.log (\(BuildScale.name)): \(figures.joined(separator: ", "))")
        // With the log a file again, the registered agent starts.
        let run = try setup.kvtool(["sync", "request", "--wait", "2"])
        #expect(run.lines.count == 1 && run.lines.first?.contains("exited with status 0") == true, "\(run.stdout)\(run.stderr)")
        #expect(eventually(BuildScale.seconds(20)) { FileManager.default.fileExists(atPath: setup.registeredMark) })
    }

    @Test(.blockingWork) func aFIFOSocketDeviceOrLinkAtARegistrationNeverHangsARequest() throws {
        // In the container, where registrations were kept before issue 47.
        let setup = try Setup("reg")
        let inContainer = try Self.expectEachPlantRefused(setup, at: setup.legacy, mark: setup.registeredMark)
        // Outside it, where the registration is kept now.
        let set = try setup.kvtool(["sync", "agent", "set", "--server", Self.deadServer, "--program", setup.program])
        #expect(set.status == 0, "\(set.stderr)")
        let registered = setup.registered
        #expect(registered.count == 1, "\(registered)")
        guard let outside = registered.first else { return }
        let kept = try Self.expectEachPlantRefused(setup, at: outside, mark: setup.registeredMark)
        print("SyncAgentContainmentTests: sync request --wait 2 with each plant at .sync-agent (\(BuildScale.name)): \(inContainer.joined(separator: ", ")); "
              + "at the registration outside the container: \(kept.joined(separator: ", "))")
    }

    /// The agent's first open in the container is its sync lock: a plant there is refused, naming it,
    /// by its deadline, and nothing is written through a link.
    @Test(.blockingWork) func aFIFOSocketDeviceOrLinkAtTheSyncLockIsRefusedNamingIt() throws {
        let setup = try Setup("lock")
        let lock = setup.device.container.path + "/.sync.lock"
        let victim = setup.device.directory.path + "/victim"
        var figures: [String] = []
        for kind in Self.kinds {
            try "untouched\n".write(toFile: victim, atomically: true, encoding: .utf8)
            unlink(lock)
            if let reason = Self.plant(kind, at: lock, victim: victim) {
                print("SyncAgentContainmentTests: no \(kind) planted at \(lock), that case is skipped: \(reason)")
                continue
            }
            let run = try setup.kvtool(["sync", "run", "--once", "--server", Self.deadServer], timeout: BuildScale.seconds(60))
            let left = setup.leftovers()
            figures.append("\(kind) \(String(format: "%.2f", run.seconds)) s")
            #expect(!run.timedOut && left.isEmpty, "a \(kind) at \(lock): \(run.seconds) s, left behind: \(left)")
            #expect(run.status != 0 && run.stderr.contains("refusing \(lock)"), "a \(kind) at \(lock): exit \(run.status): \(run.stdout)\(run.stderr)")
            #expect(try String(contentsOfFile: victim, encoding: .utf8) == "untouched\n", "written through a link at \(lock)")
            unlink(lock)
        }
        print("SyncAgentContainmentTests: sync run --once with each plant at .sync.lock (\(BuildScale.name)): \(figures.joined(separator: ", "))")
    }

    // MARK: - Finding 4: a co-tenant cannot choose the agent's program

    /// A same-user co-tenant rewrites the container's `.sync-agent` with `/bin/sh -c …` that would read
    /// the registration: a request runs the registered program, never the planted one; with nothing
    /// registered outside the container, it runs nothing and says why in one line.
    @Test(.blockingWork) func aShellPlantedAsTheContainersRegistrationIsNeverRun() throws {
        let setup = try Setup("sh")
        let set = try setup.kvtool(["sync", "agent", "set", "--server", Self.deadServer, "--program", setup.program])
        #expect(set.status == 0, "\(set.stderr)")
        let plantedMark = setup.device.directory.path + "/planted-ran"
        let stolen = setup.device.directory.path + "/stolen"
        let command = "touch '\(plantedMark)'; cat '\(setup.legacy)' '\(setup.config)'/kvstore/sync-agents/* > '\(stolen)' 2>/dev/null"
        let planted = try JSONSerialization.data(withJSONObject: ["arguments": ["/bin/sh", "-c", command], "allowInsecureHTTP": false])
        func plantShell() {
            unlink(setup.legacy)
            #expect(FileManager.default.createFile(atPath: setup.legacy, contents: planted, attributes: [.posixPermissions: 0o600]))
        }
        plantShell()

        let run = try setup.kvtool(["sync", "request", "--wait", "2"])
        #expect(run.status == 69 && run.lines.count == 1, "\(run.stdout)\(run.stderr)")
        #expect(eventually(BuildScale.seconds(20)) { FileManager.default.fileExists(atPath: setup.registeredMark) }, "the registered program did not run")
        // (A program started would have left its mark by now; absence cannot be waited for.)
        usleep(UInt32(BuildScale.seconds(0.5) * 1_000_000))
        #expect(!FileManager.default.fileExists(atPath: plantedMark), "the planted /bin/sh ran")
        #expect(!FileManager.default.fileExists(atPath: stolen), "the planted /bin/sh read the registration")

        // Nothing registered outside the container: the plant alone is refused, named, and not run.
        for path in setup.registered { unlink(path) }
        unlink(setup.registeredMark)
        plantShell()
        let alone = try setup.kvtool(["sync", "request", "--wait", "2"])
        #expect(alone.status == 69, "\(alone.stdout)\(alone.stderr)")
        #expect(alone.lines.count == 1 && alone.lines.first?.contains("\(setup.legacy) is a registration in the container") == true
                && alone.lines.first?.contains("it is not run") == true, "\(alone.stdout)\(alone.stderr)")
        let show = try setup.kvtool(["sync", "agent", "show"])
        #expect(show.status != 0 && show.stderr.contains("it is not run"), "\(show.stdout)\(show.stderr)")
        usleep(UInt32(BuildScale.seconds(0.5) * 1_000_000))
        #expect(!FileManager.default.fileExists(atPath: plantedMark), "the planted /bin/sh ran")
        #expect(!FileManager.default.fileExists(atPath: setup.registeredMark))
        #expect(FileManager.default.fileExists(atPath: setup.legacy), "a program a co-tenant chose was moved out of the container")
        #expect(setup.registered.isEmpty, "a program a co-tenant chose was registered: \(setup.registered)")
        #expect(setup.leftovers().isEmpty)
    }

    /// The credential `sync agent set` registers is in no file of the container, only in the
    /// registration outside it (0600, in a directory of 0700), and never printed; a container
    /// registered before issue 47 (its `.sync-agent` as `sync agent set` wrote it, credential inside)
    /// keeps working: its first `kvtool` command moves it out.
    @Test(.blockingWork) func theCredentialIsNeverInTheContainerAndAnOldRegistrationMovesOut() throws {
        let setup = try Setup("cred")
        let token = "kvs1_" + String(repeating: "C", count: 43)
        let tokenFile = setup.device.directory.path + "/token"
        #expect(FileManager.default.createFile(atPath: tokenFile, contents: Data(token.utf8), attributes: [.posixPermissions: 0o600]))
        let set = try setup.kvtool(["sync", "agent", "set", "--server", "http://127.0.0.1:1", "--token-file", tokenFile])
        #expect(set.status == 0, "\(set.stderr)")
        func containerFilesHolding(_ text: String) -> [String] {
            let root = setup.device.container.path
            let walker = FileManager.default.enumerator(atPath: root)
            var found: [String] = []
            while let relative = walker?.nextObject() as? String {
                var info = stat()
                let path = root + "/" + relative
                guard lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG,
                      let data = FileManager.default.contents(atPath: path) else { continue }
                if data.range(of: Data(text.utf8)) != nil { found.append(relative) }
            }
            return found
        }
        #expect(containerFilesHolding(token).isEmpty, "the credential is in the container: \(containerFilesHolding(token))")
        let registered = setup.registered
        #expect(registered.count == 1, "\(registered)")
        var info = stat()
        if let path = registered.first {
            #expect(lstat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
            #expect(lstat(setup.config + "/kvstore/sync-agents", &info) == 0 && info.st_mode & 0o777 == 0o700)
            #expect(FileManager.default.contents(atPath: path)?.range(of: Data(token.utf8)) != nil)
        }
        for arguments in [["sync", "agent", "show"], ["sync", "agent", "show", "--json"], ["sync", "status"], ["sync", "status", "--json"],
                          ["sync", "request", "--wait", "1"]] {
            let result = try setup.kvtool(arguments)
            #expect(!result.stdout.contains(token) && !result.stderr.contains(token), "\(arguments) printed the credential")
        }
        #expect(!((try? String(contentsOfFile: setup.log, encoding: .utf8)) ?? "").contains(token), "the agent's log shows the credential")

        // A container registered before issue 47: the registration (credential included) in it, as
        // `sync agent set` wrote it then.
        for path in setup.registered { unlink(path) }
        let kvtool = URL(fileURLWithPath: productsDirectory() + "/kvtool").resolvingSymlinksInPath().path
        let old = SyncAgentRegistration(arguments: [kvtool, "--root", setup.device.container.layout.root, "--group", setup.device.group,
                                                    "sync", "run", "--once", "--exit-when-idle"],
                                        server: "http://127.0.0.1:1", token: token, allowInsecureHTTP: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        #expect(FileManager.default.createFile(atPath: setup.legacy, contents: try encoder.encode(old), attributes: [.posixPermissions: 0o600]))
        let show = try setup.kvtool(["sync", "agent", "show"])
        #expect(show.status == 0 && show.stdout.contains("agent: \(kvtool) --root"), "\(show.stdout)\(show.stderr)")
        #expect(show.stdout.contains("(with a credential)") && !show.stdout.contains(token), "\(show.stdout)")
        #expect(!FileManager.default.fileExists(atPath: setup.legacy), "the old registration stayed in the container")
        #expect(containerFilesHolding(token).isEmpty, "the credential is in the container: \(containerFilesHolding(token))")
        #expect(setup.registered.count == 1 && setup.registered.allSatisfy {
            FileManager.default.contents(atPath: $0)?.range(of: Data(token.utf8)) != nil
        }, "the credential did not move out: \(setup.registered)")
        // The agent the request above started retries its unreachable gateway: stopped here.
        _ = setup.leftovers()
    }
}
#endif
