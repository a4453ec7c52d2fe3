import Foundation
import Testing
#if canImport(Glibc)
import Glibc
#endif

// Shared by the reliability (fault and stress) tests and the `kvtest-helper` commands they start.

/// Short runs by default (what `make test` runs); long ones when `KVSTORE_STRESS=1` (`make stress`).
public enum StressLevel {
    /// Whether `KVSTORE_STRESS=1` asks for the long versions.
    public static var isLong: Bool { ProcessInfo.processInfo.environment["KVSTORE_STRESS"] == "1" }

    /// `short` in `make test`, `long` in `make stress`.
    public static func pick<T>(short: T, long: T) -> T { isLong ? long : short }

    /// `"short"` or `"long"`, for the printed figures.
    public static var name: String { isLong ? "long" : "short" }

    /// `"debug"` or `"release"`, for the printed figures.
    public static var build: String {
        #if DEBUG
        "debug"
        #else
        "release"
        #endif
    }
}

/// Monotonic nanoseconds (`CLOCK_MONOTONIC`), comparable between processes on one machine.
public func monotonicNow() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// FNV-1a, 64 bits: the checksum the crash tests store with each record.
public struct FNV1a: Sendable {
    public private(set) var value: UInt64 = 0xcbf2_9ce4_8422_2325
    public init() {}
    public mutating func add(_ bytes: some Sequence<UInt8>) {
        for byte in bytes { value = (value ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
    }
    public mutating func add(_ integer: Int) {
        withUnsafeBytes(of: UInt64(bitPattern: Int64(integer)).bigEndian) { add($0) }
    }
}

/// One record of a crash-test transaction: transaction `seq` writes `count` of them (keys
/// `seq * 16 + index`), each carrying a checksum of everything else in it.
public struct StressRecord: Codable, Equatable, Sendable {
    public var seq: Int
    public var index: Int
    public var count: Int
    public var payload: [UInt8]
    public var checksum: UInt64

    /// Records per transaction are at most this many (the key is `seq * maxCount + index`).
    public static let maxCount = 16

    public static func key(seq: Int, index: Int) -> Int { seq * maxCount + index }

    public init(seq: Int, index: Int, count: Int, payload: [UInt8]) {
        self.seq = seq
        self.index = index
        self.count = count
        self.payload = payload
        checksum = 0
        checksum = computedChecksum
    }

    public var computedChecksum: UInt64 {
        var hash = FNV1a()
        hash.add(seq)
        hash.add(index)
        hash.add(count)
        hash.add(payload)
        return hash.value
    }

    /// Whether the checksum matches the fields.
    public var isIntact: Bool { checksum == computedChecksum }
}

/// The history-enabled log entry of a crash-test transaction: one per transaction, so that the
/// history holds exactly one entry per committed transaction.
public struct StressLogEntry: Codable, Equatable, Sendable {
    public var seq: Int
    public var count: Int
    /// The XOR of the checksums of the transaction's records.
    public var checksum: UInt64

    public init(seq: Int, count: Int, checksum: UInt64) {
        self.seq = seq
        self.count = count
        self.checksum = checksum
    }
}

/// Percentiles of a list of measurements.
public struct Percentiles: Sendable {
    public let sorted: [Double]
    public init(_ values: [Double]) { sorted = values.sorted() }
    public func at(_ fraction: Double) -> Double {
        guard !sorted.isEmpty else { return 0 }
        return sorted[min(sorted.count - 1, Int(Double(sorted.count) * fraction))]
    }
    public var p50: Double { at(0.5) }
    public var p99: Double { at(0.99) }
    public var max: Double { sorted.last ?? 0 }
}

/// Background processes a test started: `stopAll()` (also run when the value goes away) sends
/// `SIGCONT` and `SIGKILL` to those still running and reaps them, so that a failing test leaves no
/// process behind.
public final class ProcessReaper: @unchecked Sendable {
    private let lock = NSLock()
    private var processes: [BackgroundProcess] = []

    public init() {}

    deinit { stopAll() }

    /// Starts `kvtest-helper` with `arguments` and keeps track of it.
    public func helper(_ arguments: [String]) throws -> BackgroundProcess {
        track(try BackgroundProcess.helper(arguments))
    }

    /// Starts `executable` with `arguments` and keeps track of it.
    public func start(_ executable: String, _ arguments: [String]) throws -> BackgroundProcess {
        track(try BackgroundProcess(executable, arguments))
    }

    @discardableResult
    public func track(_ process: BackgroundProcess) -> BackgroundProcess {
        lock.lock(); processes.append(process); lock.unlock()
        return process
    }

    /// Kills and reaps every tracked process still running.
    public func stopAll() {
        lock.lock(); let all = processes; processes = []; lock.unlock()
        for process in all where process.process.isRunning {
            process.kill(SIGCONT)
            process.kill(SIGKILL)
        }
        for process in all { process.wait() }
    }
}

/// A one-page file mapped shared, through which a helper tells the test where it was when it was
/// killed (the page cache outlives the process).
public final class SharedPhase: @unchecked Sendable {
    public let path: String
    private let base: UnsafeMutablePointer<UInt8>

    /// Maps `path`, creating it as one zeroed page if needed.
    public init(path: String) throws {
        self.path = path
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        defer { close(fd) }
        guard ftruncate(fd, 4096) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
        guard let map = mmap(nil, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), map != MAP_FAILED else {
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        base = map.assumingMemoryBound(to: UInt8.self)
    }

    deinit { munmap(base, 4096) }

    /// The phase byte.
    public var value: UInt8 {
        get { base.pointee }
        set { base.pointee = newValue }
    }
}

/// Where a crash-test writer was (``SharedPhase``'s byte).
public enum WriterPhase: UInt8, CaseIterable, Sendable, CustomStringConvertible {
    /// Starting up, between transactions, or waiting for the write lock.
    case beforeBegin = 0
    /// Inside the transaction's closure, holding the write lock, putting records.
    case inTransaction = 1
    /// The closure returned and the observers ran: LMDB is committing (writing pages, syncing).
    case committing = 2
    /// The commit returned; the acknowledgement is not printed yet.
    case committedNotAcknowledged = 3

    public var description: String {
        switch self {
        case .beforeBegin: "before begin"
        case .inTransaction: "mid-transaction"
        case .committing: "during commit"
        case .committedNotAcknowledged: "after commit, before the ack"
        }
    }
}

/// `key=value` fields of a summary line printed by a helper (`summary reads=12 maxUs=40`).
public func summaryFields(_ line: String?) -> [String: String] {
    guard let line else { return [:] }
    var fields: [String: String] = [:]
    for part in line.split(separator: " ") {
        let pair = part.split(separator: "=", maxSplits: 1)
        if pair.count == 2 { fields[String(pair[0])] = String(pair[1]) }
    }
    return fields
}

/// How a process ended: `exit N` or `signal N` (`signal 7` is SIGBUS), or `running`.
public func describeTermination(_ process: BackgroundProcess) -> String {
    if process.process.isRunning { return "running" }
    let reason = process.process.terminationReason == .uncaughtSignal ? "signal" : "exit"
    return "\(reason) \(process.process.terminationStatus)"
}
