import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Exchanges two paths atomically (`renameat2(RENAME_EXCHANGE)`, which Swift's Glibc module does not
/// import) over and over on its own thread, as a hostile co-tenant racing an open would: at every
/// moment each path is one of the two files, never missing.
public final class PathSwapper: @unchecked Sendable {
    private typealias RenameAt2 = @convention(c) (Int32, UnsafePointer<CChar>, Int32, UnsafePointer<CChar>, UInt32) -> Int32
    private let renameat2 = unsafeBitCast(dlsym(UnsafeMutableRawPointer(bitPattern: 0), "renameat2")!, to: RenameAt2.self)
    private let a: String, b: String
    private let lock = NSLock()
    private var running = true
    private var swaps = 0
    private var finished = false

    public init(_ a: String, _ b: String) { (self.a, self.b) = (a, b) }

    public func start() {
        // The thread is not kept: a swapper holding its thread, whose closure holds the swapper, would
        // be a cycle that LeakSanitizer reports.
        Thread { [self] in
            while lock.withLock({ running }) {
                if renameat2(AT_FDCWD, a, AT_FDCWD, b, 2) == 0 { lock.withLock { swaps += 1 } }
            }
            lock.withLock { finished = true }
        }.start()
    }

    /// Stops, waits for the thread, puts both paths back where they started, and returns the number
    /// of swaps made.
    public func stop() -> Int {
        lock.withLock { running = false }
        while !lock.withLock({ finished }) { usleep(1_000) }
        let count = lock.withLock { swaps }
        if count % 2 == 1 { _ = renameat2(AT_FDCWD, a, AT_FDCWD, b, 2) }
        return count
    }
}
