import Foundation
import KVStore
import Testing
#if canImport(Glibc)
import Glibc
#endif

// Shared by every test target: temporary containers, and running the built products as real processes.

/// A temporary directory, removed when the value is deinitialised.
public final class TemporaryDirectory: @unchecked Sendable {
    public let path: String

    public init() {
        var template = Array((Self.systemTemporaryDirectory + "/kvstore-test-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { fatalError("mkdtemp failed: \(errno)") }
        path = String(cString: made)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// `$TMPDIR` (or `/tmp`) as a real path without a trailing slash, so paths built on it compare
    /// equal to the normalised paths the library reports.
    public static var systemTemporaryDirectory: String {
        let raw = NSTemporaryDirectory()
        guard let real = realpath(raw, nil) else { return "/tmp" }
        defer { free(real) }
        return String(cString: real)
    }

    /// A fresh store in a new subdirectory.
    public func store(_ name: String = "store", options: Store.Options = Store.Options()) throws -> Store {
        let directory = path + "/" + name
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return try Store(directory: directory, options: options)
    }

    /// A container for `group` under this directory.
    public func container(_ group: String = "group.com.example.test", options: SharedContainer.Options = .init()) throws -> SharedContainer {
        try SharedContainer(groupIdentifier: group, root: path, options: options)
    }
}

/// The directory holding the built products (`kvtool`, `kvtest-helper`) next to the test bundle.
public func productsDirectory() -> String {
    var buffer = [CChar](repeating: 0, count: 4096)
    let count = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    let exe = String(decoding: buffer[0..<max(count, 0)].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    var url = URL(fileURLWithPath: exe).deletingLastPathComponent()
    // swift-testing may run from inside the .xctest bundle on some layouts.
    while url.path.hasSuffix(".xctest") || url.lastPathComponent == "Contents" || url.lastPathComponent == "MacOS" {
        url.deleteLastPathComponent()
    }
    return url.path
}

/// Writes a secret file (a token, a database URL with its password, a JWT secret) as a user should:
/// readable by its owner only (0600), or the commands that read it refuse it, as `ssh` refuses a key
/// others can read. Replaces a file already there.
public func writeSecretFile(_ path: String, _ contents: some Sequence<UInt8>) throws {
    unlink(path)
    let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard fd >= 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path]) }
    defer { close(fd) }
    let bytes = Array(contents)
    guard bytes.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) == bytes.count else {
        throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path])
    }
}

/// ``writeSecretFile(_:_:)`` with text.
public func writeSecretFile(_ path: String, _ text: String) throws {
    try writeSecretFile(path, Array(text.utf8))
}

public struct ProcessResult: Sendable {
    public var status: Int32
    public var stdout: String
    public var stderr: String
}

/// Runs a program to completion and captures its output. If it is still running after `timeout`
/// seconds (default ``ProcessTimeout/seconds``), it is killed (`SIGKILL`) and the running test fails
/// with a message naming it; the result then has the status of the kill.
@discardableResult
public func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, stdin: String? = nil,
                timeout: TimeInterval? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws -> ProcessResult {
    noteBlockingWait("run \(URL(fileURLWithPath: executable).lastPathComponent)", sourceLocation: sourceLocation)
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    let input = Pipe()
    process.standardInput = input
    // A child that exits before reading all its input must fail the write, not kill the test runner.
    signal(SIGPIPE, SIG_IGN)
    try process.run()
    // The deadline: a thread that kills the process unless it is told first that the process exited.
    let limit = timeout ?? ProcessTimeout.seconds
    let finished = DispatchSemaphore(value: 0)
    let killed = LockedData()
    let pid = process.processIdentifier
    let heldOpen = LockedData()
    let watchdog = Thread {
        if finished.wait(timeout: .now() + limit) == .timedOut {
            // Only a process still running is killed: one that exited was reaped, and its pid may be
            // another process's by now. One that exited while its output stays open had its pipe
            // inherited by a process that outlives it.
            if process.isRunning {
                killed.set(Data())
                kill(pid, SIGCONT)
                kill(pid, SIGKILL)
            } else {
                heldOpen.set(Data())
            }
        }
    }
    watchdog.start()
    // Feed standard input from its own thread, so that a child writing before it reads cannot block us.
    let writer = input.fileHandleForWriting
    let fed = LockedData()
    let stdinThread = Thread {
        if let stdin { try? writer.write(contentsOf: Data(stdin.utf8)) }
        try? writer.close()
        fed.set(Data())
    }
    stdinThread.start()
    // Read both pipes concurrently so that neither fills up and blocks the child.
    let errData = LockedData()
    let errThread = Thread { errData.set(err.fileHandleForReading.readDataToEndOfFile()) }
    errThread.start()
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    finished.signal()
    while !errData.isSet || !fed.isSet { usleep(1000) }
    let name = ([URL(fileURLWithPath: executable).lastPathComponent] + arguments.prefix(2)).joined(separator: " ")
    if killed.isSet {
        ProcessTimeout.recordTimeout("process \(pid) (\(name))", after: limit,
                                     output: String(decoding: outData, as: UTF8.self), sourceLocation: sourceLocation)
    } else if heldOpen.isSet {
        Issue.record(Comment(rawValue: "process \(pid) (\(name)) exited, but its output stayed open past \(Int(limit)) s: another process inherited its pipe"),
                     sourceLocation: sourceLocation)
    }
    return ProcessResult(status: process.terminationStatus,
                         stdout: String(decoding: outData, as: UTF8.self),
                         stderr: String(decoding: errData.value, as: UTF8.self))
}

final class LockedData: @unchecked Sendable {
    private let lock = NSLock()
    private var data: Data?
    func set(_ d: Data) { lock.lock(); data = d; lock.unlock() }
    var isSet: Bool { lock.lock(); defer { lock.unlock() }; return data != nil }
    var value: Data { lock.lock(); defer { lock.unlock() }; return data ?? Data() }
}

/// Runs `kvtest-helper`.
@discardableResult
public func helper(_ arguments: [String], timeout: TimeInterval? = nil, sourceLocation: SourceLocation = #_sourceLocation) throws -> ProcessResult {
    try run(productsDirectory() + "/kvtest-helper", arguments, timeout: timeout, sourceLocation: sourceLocation)
}

/// The payload the widget-feed tests and `kvtest-helper`'s feed commands publish and read: `sum` is the
/// sum of `values`, and `padding` makes the file big enough that a torn read would be likely if
/// publication were not atomic.
public struct TestFeedPayload: Codable, Equatable, Sendable {
    public var sequence: Int
    public var values: [Int]
    public var sum: Int
    public var padding: String

    public init(sequence: Int, size: Int) {
        self.sequence = sequence
        values = (0..<64).map { ($0 &* 7919 &+ sequence &* 104_729) % 100_003 }
        sum = values.reduce(0, +)
        padding = String(repeating: String(UnicodeScalar(UInt8(65 + sequence % 26))), count: size)
    }

    /// Whether the payload is whole: the sum matches and the padding is one letter throughout.
    public var isConsistent: Bool {
        values.reduce(0, +) == sum && padding.allSatisfy { $0 == padding.first }
    }
}

/// Runs blocking work (a process to wait for, a semaphore, a cluster to start) on a thread of its own:
/// the cooperative pool has as many threads as cores (two here), and every other test's tasks, the
/// replicators' deadlines and the in-process servers need them while this waits. A test that blocks
/// a pool thread instead (`Task.detached { semaphore.wait() }`) can hold up every other suite.
public func offPool<R: Sendable>(_ work: @escaping @Sendable () throws -> R) async throws -> R {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
    }
}

/// The number of threads of this process now (`/proc/self/task`).
public func processThreadCount() -> Int {
    ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []).count
}
