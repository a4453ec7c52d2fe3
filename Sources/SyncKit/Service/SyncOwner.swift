#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#endif

/// The process that owns a container's sync: the one holding its `.sync.lock`, which alone runs a
/// replicator (``SyncService``).
public struct SyncOwner: Codable, Hashable, Sendable, CustomStringConvertible {
    /// How the owner syncs.
    public enum Mode: String, Codable, Hashable, Sendable {
        /// A live replicator (an app's, or `kvtool sync run`): it stays, and syncs on every commit.
        case live
        /// One round, or an agent started for a request (`kvtool sync run --once`): it exits when done.
        case once
    }

    public var pid: Int32
    /// When it took ownership.
    public var since: Date
    public var mode: Mode
    /// The process's start time in clock ticks since boot (`/proc/PID/stat`): a pid reused by another
    /// process after the owner died is told apart.
    public var startTicks: UInt64

    public init(pid: Int32, since: Date, mode: Mode, startTicks: UInt64) {
        self.pid = pid
        self.since = since
        self.mode = mode
        self.startTicks = startTicks
    }

    /// This process, as an owner from now.
    static func current(mode: Mode, now: Date = Date()) -> SyncOwner {
        let pid = getpid()
        return SyncOwner(pid: pid, since: now, mode: mode, startTicks: ProcessStart.ticks(of: pid) ?? 0)
    }

    /// Whether the process is still running: the same pid with the same start time, and not a zombie
    /// (a killed process its parent has not reaped yet holds no lock).
    public var isAlive: Bool {
        guard let ticks = ProcessStart.ticks(of: pid) else { return false }
        return ticks == startTicks
    }

    public var description: String { "pid \(pid) (\(mode.rawValue))" }
}

/// Start times of processes, from `/proc`.
enum ProcessStart {
    /// Field 22 of `/proc/PID/stat`, or `nil` when the process does not exist or is a zombie.
    static func ticks(of pid: Int32) -> UInt64? {
        guard pid > 0 else { return nil }
        let fd = open("/proc/\(pid)/stat", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 1024)
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else { return nil }
        // The command name (field 2) is in parentheses and may hold spaces or parentheses: the
        // fields that follow start after the last ')'.
        let bytes = buffer[0..<count]
        guard let close = bytes.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = bytes[(close + 1)...].split(separator: UInt8(ascii: " "))
        // fields[0] is field 3 (the state), so field 22 is fields[19].
        guard fields.count > 19, let state = fields[0].first else { return nil }
        if state == UInt8(ascii: "Z") || state == UInt8(ascii: "X") { return nil }
        return UInt64(String(decoding: fields[19], as: UTF8.self))
    }
}
