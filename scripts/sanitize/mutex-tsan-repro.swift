// Why KVStore guards shared state with its own `Locked` (a pthread mutex) instead of
// Synchronization.Mutex: ThreadSanitizer reports a race on this correct program, in which every access
// to `table` is inside `withLock`. On Linux, Mutex hands a contended lock over in the kernel (a
// priority-inheritance futex), with no user-space atomic that ThreadSanitizer could see, so it knows of
// no happens-before edge between two critical sections. The same program with NSLock or KVStore's
// Locked (pthread mutexes, which ThreadSanitizer intercepts) is reported clean.
//
//   swiftc -sanitize=thread -g scripts/sanitize/mutex-tsan-repro.swift -o /tmp/mutex-tsan-repro
//   /tmp/mutex-tsan-repro          # WARNING: ThreadSanitizer: Swift access race (most runs)
import Foundation
import Synchronization

let table = Mutex<[String: Int]>([:])

let group = DispatchGroup()
for thread in 0..<4 {
    group.enter()
    Thread.detachNewThread {
        for i in 0..<20_000 {
            table.withLock { $0["k\(i % 64)", default: 0] += thread }
        }
        group.leave()
    }
}
group.wait()
print("done:", table.withLock { $0.count }, "keys")
