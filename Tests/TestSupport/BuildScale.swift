import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// How much slower this build runs than the debug build the tests' timing thresholds were set on:
/// 1 in debug and release, 4 under AddressSanitizer, 8 under ThreadSanitizer (the sanitizer runs of
/// RELIABILITY.md took 2–5 times as long as plain runs, on a loaded machine). `KVSTORE_TIME_SCALE`
/// overrides it. A timing threshold that is asserted is multiplied by ``factor``; a figure that
/// cannot scale is printed instead.
public enum BuildScale {
    /// The sanitizer this process runs under, found by its runtime's entry point: `"thread"`,
    /// `"address"`, or `nil`.
    public static let sanitizer: String? = {
        guard let handle = dlopen(nil, RTLD_NOW) else { return nil }
        defer { dlclose(handle) }
        if dlsym(handle, "__tsan_init") != nil { return "thread" }
        if dlsym(handle, "__asan_init") != nil { return "address" }
        return nil
    }()

    /// The factor timing thresholds are multiplied by.
    public static let factor: Double = {
        if let text = ProcessInfo.processInfo.environment["KVSTORE_TIME_SCALE"], let value = Double(text), value > 0 {
            return value
        }
        switch sanitizer {
        case "thread": return 8
        case "address": return 4
        default: return 1
        }
    }()

    /// `seconds` scaled by ``factor``.
    public static func seconds(_ seconds: Double) -> Double { seconds * factor }

    /// `"debug"`, `"release"`, `"debug, thread sanitizer"`…, for the printed figures.
    public static var name: String {
        StressLevel.build + (sanitizer.map { ", \($0) sanitizer" } ?? "")
    }
}

/// How long a test waits for a process it started before it kills it and fails: 300 s, scaled by
/// ``BuildScale/factor`` (a hung process then fails its test with a message instead of hanging the
/// suite). `KVSTORE_PROCESS_TIMEOUT` (seconds) overrides it.
public enum ProcessTimeout {
    public static var seconds: Double {
        if let text = ProcessInfo.processInfo.environment["KVSTORE_PROCESS_TIMEOUT"], let value = Double(text), value > 0 {
            return value
        }
        return BuildScale.seconds(StressLevel.isLong ? 1_800 : 300)
    }

    /// Records a test failure for a process that was killed at its deadline.
    static func recordTimeout(_ description: String, after seconds: Double, output: String, sourceLocation: SourceLocation) {
        let tail = output.split(separator: "\n").suffix(5).joined(separator: " | ")
        Issue.record(Comment(rawValue: "\(description) did not finish within \(Int(seconds)) s: killed (SIGKILL). Last output: \(tail)"),
                     sourceLocation: sourceLocation)
    }
}
