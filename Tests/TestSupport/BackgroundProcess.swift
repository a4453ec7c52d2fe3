import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// A product (`kvtest-helper`, `kvtool`) running as another process while the test goes on: its
/// standard output is collected line by line, so the test can wait for a line ("ready", "paused"),
/// kill the process, or wait for it to finish. ``wait(timeout:sourceLocation:)`` has a deadline: a
/// process still running then is killed and the test fails with a message, so that a hung process
/// cannot hang the suite.
public final class BackgroundProcess: @unchecked Sendable {
    public let process = Process()
    private let lock = NSCondition()
    private var lines: [String] = []
    private var partial = Data()
    private var errorData = Data()
    private var outputClosed = false
    private var errorClosed = false
    private var exited = false
    /// Whether ``wait(timeout:sourceLocation:)`` had to kill the process at its deadline.
    public private(set) var timedOut = false

    /// Starts `executable` with `arguments`, and `environment` added to this process's.
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        }
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        process.terminationHandler = { [weak self] _ in
            guard let self else { return }
            lock.lock(); exited = true; lock.broadcast(); lock.unlock()
        }
        try process.run()
        Thread.detachNewThread { [self] in
            let handle = out.fileHandleForReading
            while true {
                let chunk = handle.availableData
                lock.lock()
                if chunk.isEmpty {
                    if !partial.isEmpty { lines.append(String(decoding: partial, as: UTF8.self)) }
                    outputClosed = true
                    lock.broadcast(); lock.unlock()
                    return
                }
                partial.append(chunk)
                while let newline = partial.firstIndex(of: 0x0A) {
                    lines.append(String(decoding: partial[partial.startIndex..<newline], as: UTF8.self))
                    partial = Data(partial[(newline + 1)...])
                }
                lock.broadcast(); lock.unlock()
            }
        }
        Thread.detachNewThread { [self] in
            let data = err.fileHandleForReading.readDataToEndOfFile()
            lock.lock(); errorData = data; errorClosed = true; lock.broadcast(); lock.unlock()
        }
    }

    /// Starts `kvtest-helper` with `arguments`.
    public static func helper(_ arguments: [String]) throws -> BackgroundProcess {
        try BackgroundProcess(productsDirectory() + "/kvtest-helper", arguments)
    }

    public var pid: Int32 { process.processIdentifier }

    /// The complete lines printed so far.
    public var output: [String] {
        lock.lock(); defer { lock.unlock() }
        return lines
    }

    /// Waits until a line satisfying `predicate` has been printed, and returns it; `nil` if the
    /// output ends or `timeout` seconds (default 60, scaled by ``BuildScale/factor``) pass first.
    public func waitForLine(timeout: TimeInterval? = nil, sourceLocation: SourceLocation = #_sourceLocation, where predicate: (String) -> Bool) -> String? {
        noteBlockingWait("waitForLine", sourceLocation: sourceLocation)
        let deadline = Date(timeIntervalSinceNow: timeout ?? BuildScale.seconds(60))
        lock.lock(); defer { lock.unlock() }
        var checked = 0
        while true {
            while checked < lines.count {
                if predicate(lines[checked]) { return lines[checked] }
                checked += 1
            }
            if outputClosed { return nil }
            if !lock.wait(until: deadline) { return nil }
        }
    }

    /// Waits for the process to exit (and its output to close) and returns its status, output lines
    /// and standard error. If it is still running after `timeout` seconds (default
    /// ``ProcessTimeout/seconds``), it is killed (`SIGCONT`, `SIGKILL`), ``timedOut`` is set and the
    /// running test fails with a message that names the process and its last output.
    @discardableResult
    public func wait(timeout: TimeInterval? = nil, sourceLocation: SourceLocation = #_sourceLocation) -> (status: Int32, lines: [String], stderr: String) {
        noteBlockingWait("wait", sourceLocation: sourceLocation)
        let limit = timeout ?? ProcessTimeout.seconds
        let deadline = Date(timeIntervalSinceNow: limit)
        lock.lock()
        while !exited && lock.wait(until: deadline) {}
        let expired = !exited
        lock.unlock()
        if expired && process.isRunning {
            kill(SIGCONT)
            kill(SIGKILL)
            lock.lock(); timedOut = true; let printed = lines.joined(separator: "\n"); lock.unlock()
            let name = ([URL(fileURLWithPath: process.executableURL?.path ?? "?").lastPathComponent] + (process.arguments ?? []).prefix(2))
                .joined(separator: " ")
            ProcessTimeout.recordTimeout("process \(pid) (\(name))", after: limit, output: printed, sourceLocation: sourceLocation)
        }
        // Bounded too: Foundation learns of the exit through a descriptor the process inherited, which
        // a process it started may keep open (Swift's crash backtracer did, hung, and the run with it).
        let seenDeadline = Date(timeIntervalSinceNow: 30)
        lock.lock()
        while !exited && lock.wait(until: seenDeadline) {}
        let seen = exited
        lock.unlock()
        guard seen else {
            Issue.record(Comment(rawValue: "process \(pid) was never seen to exit, 30 s after it was waited for and killed: a process it started holds its descriptors"),
                         sourceLocation: sourceLocation)
            lock.lock(); defer { lock.unlock() }
            return (-1, lines, String(decoding: errorData, as: UTF8.self))
        }
        process.waitUntilExit()
        // Its output closes when it exits, unless a process it started still holds the pipes: then
        // what was read so far is returned after a few seconds.
        let closeDeadline = Date(timeIntervalSinceNow: 10)
        lock.lock(); defer { lock.unlock() }
        while (!outputClosed || !errorClosed) && lock.wait(until: closeDeadline) {}
        return (process.terminationStatus, lines, String(decoding: errorData, as: UTF8.self))
    }

    /// Sends `signal` to the process, while it runs: once it has exited and been reaped, its pid may
    /// be another process's (the pids of a machine that starts thousands of processes wrap).
    public func kill(_ signal: Int32 = SIGKILL) {
        guard process.isRunning else { return }
        _ = Glibc.kill(process.processIdentifier, signal)
    }
}
