import Foundation
import KVStore
#if canImport(Glibc)
import Glibc
#endif

/// The line a child process prints to say it is ready, parsed: a type per kind of child (a gateway's
/// is `GatewayReadyLine`), so that the process that waits for it keeps no text of its own.
protocol ReadyLine {
    /// The ready line `line` is, or `nil` for any other line.
    init?(_ line: String)
}

/// A child process of the demo and the benchmarks: `program` (default: this executable; a name:
/// built next to it; a path: that program) run with `arguments`, its output read line by line and,
/// for the demo, relayed indented. Every child has a timeout: one still running after `timeout`
/// seconds is killed (and ``finish(acceptingSignal:)`` then fails).
final class ChildProcess {
    let process = Process()
    private let output = Pipe()
    private var pending = Data()
    /// What goes before each line relayed to this process's output; `nil`: lines are not relayed.
    private let indent: String?

    init(program: String? = nil, arguments: [String], timeout: Double = 300, relayIndent indent: String? = "   ",
         quietErrors: Bool = false) throws {
        self.indent = indent
        process.executableURL = URL(fileURLWithPath: program?.hasPrefix("/") == true ? program! : try Demo.programPath(program))
        process.arguments = arguments
        process.standardOutput = output
        if quietErrors { process.standardError = FileHandle.nullDevice }
        try process.run()
        let child = process
        Self.started.withLock { $0.append(child) }
        let pid = process.processIdentifier
        let process = self.process
        // A timer of the process's one watcher thread (``KVStore/Watcher``), no thread of its own.
        _ = try? Watcher.shared.arm([], until: .now + .milliseconds(Int64(timeout * 1000))) { _ in
            if process.isRunning { kill(pid, SIGKILL) }
        }
    }

    /// The next line of the output (relayed), or `nil` when it ends.
    func nextLine() -> String? {
        while true {
            if let newline = pending.firstIndex(of: 0x0A) {
                let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                pending.removeSubrange(pending.startIndex...newline)
                if let indent { print(indent + line) }
                return line
            }
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { return nil }
            pending.append(chunk)
        }
    }

    /// Relays lines until one contains `marker` (or the output ends); returns that line.
    @discardableResult
    func relay(untilLineContaining marker: String) -> String? {
        while let line = nextLine() {
            if line.contains(marker) { return line }
        }
        return nil
    }

    /// Reads lines until one is `Ready`'s; throws, naming the last line read, if the output ends first
    /// (the child failed to start, or its timeout killed it).
    func ready<Ready: ReadyLine>(_ type: Ready.Type, what: String) throws -> Ready {
        var last: String?
        while let line = nextLine() {
            if let ready = Ready(line) { return ready }
            last = line
        }
        throw CLIError(.failure, "\(what) did not start\(last.map { ": it said \($0)" } ?? "")")
    }

    /// The rest of the output, unrelayed, once the child closes it (at its exit, or its timeout's).
    func remainingOutput() -> Data {
        defer { pending = Data() }
        return pending + output.fileHandleForReading.readDataToEndOfFile()
    }

    /// Relays the rest of the output and checks the exit status (`signal`: ended by that signal,
    /// which this process sent, is fine too).
    func finish(acceptingSignal signal: Int32? = nil) throws {
        let rest = remainingOutput()
        process.waitUntilExit()
        if let indent {
            for line in String(decoding: rest, as: UTF8.self).split(separator: "\n") { print(indent + line) }
        }
        if let signal, process.terminationReason == .uncaughtSignal, process.terminationStatus == signal { return }
        guard process.terminationStatus == 0 else {
            throw CLIError(.failure, "the \(process.executableURL?.lastPathComponent ?? "child") process (\(process.arguments?.first ?? "")) exited with status \(process.terminationStatus)")
        }
    }

    /// Every child started, so that a demo or a bench that fails part-way leaves none running
    /// (``killRunning()``): a gateway or a live replicator left behind would hold this process's output
    /// open, and whoever reads it would wait.
    private static let started = Locked<[Process]>([])

    /// Kills (SIGKILL) every child still running, and waits for each.
    static func killRunning() {
        let running = started.withLock { processes -> [Process] in
            defer { processes.removeAll() }
            return processes.filter(\.isRunning)
        }
        for process in running {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Stops the child (SIGTERM: a gateway drains) and waits for it.
    func stop() {
        if process.isRunning { process.terminate() }
        process.waitUntilExit()
    }
}
