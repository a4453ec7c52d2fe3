#if PostgreSQL
import Foundation

/// A process's peak and current resident set, in MiB (`VmHWM` and `VmRSS` of `/proc/PID/status`;
/// 0 for a process that is gone): what a server's tests and benchmarks (the sync gateway's) watch.
public func residentMemory(of pid: Int32) -> (peak: Double, now: Double) {
    let status = procFile("/proc/\(pid)/status")
    func field(_ name: String) -> Double {
        let line = status.split(separator: "\n").first { $0.hasPrefix(name + ":") } ?? ""
        return (Double(line.split(separator: " ").dropFirst().first ?? "0") ?? 0) / 1024
    }
    return (field("VmHWM"), field("VmRSS"))
}

/// A `/proc` file's whole text ("" when it cannot be read). Such a file reports no size, and
/// `String(contentsOfFile:)` reads its first page only (4,050 of 24,450 bytes of a busy
/// `/proc/net/tcp`); a file handle reads to the end.
public func procFile(_ path: String) -> String {
    guard let handle = FileHandle(forReadingAtPath: path) else { return "" }
    defer { try? handle.close() }
    return String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
}
#endif
