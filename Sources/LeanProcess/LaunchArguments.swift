#if canImport(Glibc)
import Glibc
#endif

/// What the lean executables (`trainer-extension`, `checklist-widget`) share: `--name value` options
/// parsed by hand, a one-line failure, and the process's peak memory. They link neither
/// swift-argument-parser nor Foundation: a notification extension has a 24 MB budget, and a widget's
/// start-up is felt.
public struct LaunchArguments {
    private var values: [String: String] = [:]
    private var flags: Set<String> = []

    /// Parses `arguments` (without the program name): each of `options` takes a value, each of
    /// `flags` takes none; anything else is an error that names it.
    public init(_ arguments: some Collection<String>, options: Set<String>, flags: Set<String>) throws(LaunchError) {
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            if flags.contains(argument) {
                self.flags.insert(argument)
            } else if options.contains(argument) {
                guard let value = rest.popFirst() else { throw LaunchError("\(argument) needs a value") }
                values[argument] = value
            } else {
                throw LaunchError("unknown argument '\(argument)'; accepted: \((options.map { "\($0) VALUE" } + flags).sorted().joined(separator: ", "))")
            }
        }
    }

    public subscript(_ option: String) -> String? { values[option] }

    public func has(_ flag: String) -> Bool { flags.contains(flag) }

    /// The value of `option` as a number, or `nil` when it is absent.
    public func number<T: LosslessStringConvertible>(_ option: String, as type: T.Type = T.self) throws(LaunchError) -> T? {
        guard let text = values[option] else { return nil }
        guard let value = T(text) else { throw LaunchError("\(option) '\(text)' is not a valid number") }
        return value
    }
}

/// A failure to report in one line and exit with status 1.
public struct LaunchError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

public enum LeanProcess {
    /// Runs `body`; an error is printed as one line on standard error, and the process exits with 1.
    public static func main(_ name: String, _ body: () throws -> Void) -> Never {
        do {
            try body()
            exit(0)
        } catch {
            let line = "\(name): \(error)".split(separator: "\n").joined(separator: " ") + "\n"
            _ = line.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
            exit(1)
        }
    }

    /// This process's peak resident set in MiB with one decimal: `VmHWM` from `/proc/self/status`
    /// (`getrusage`'s `ru_maxrss` carries the parent's peak over through fork and exec), or `"?"`.
    public static func peakResidentMiB() -> String {
        guard let kib = peakResidentKiB() else { return "?" }
        let tenths = (kib * 10 + 512) / 1024
        return "\(tenths / 10).\(tenths % 10)"
    }

    /// `VmHWM` in KiB, or `nil` when `/proc/self/status` cannot be read.
    public static func peakResidentKiB() -> Int? {
        let fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 16 {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            bytes += chunk[0..<n]
        }
        for line in bytes.split(separator: 0x0A) where line.starts(with: "VmHWM:".utf8) {
            let digits = line.drop(while: { !(0x30...0x39).contains($0) }).prefix(while: { (0x30...0x39).contains($0) })
            return Int(String(decoding: digits, as: UTF8.self))
        }
        return nil
    }

    /// Writes `line` (made one line) on standard error, whole: a note beside the answer on standard
    /// output, such as why a notification was not recorded.
    public static func note(_ line: String) {
        let text = line.split(separator: "\n").joined(separator: " ") + "\n"
        _ = text.utf8CString.withUnsafeBufferPointer { write(2, $0.baseAddress, $0.count - 1) }
    }

    /// Writes what `print` buffered, so that a parent reading a pipe sees it now.
    public static func flushOutput() { fflush(nil) }

    /// The process ID.
    public static var pid: Int32 { getpid() }
}
