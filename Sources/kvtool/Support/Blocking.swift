import Dispatch
import KVStore

/// Runs async work from a synchronous command and waits for it (`kvtool`'s commands are synchronous;
/// the push demo and `sync` call async APIs).
func blocking<R: Sendable>(_ work: @escaping @Sendable () async throws -> R) throws -> R {
    let result = Locked<Result<R, any Error>?>(nil)
    let done = DispatchSemaphore(value: 0)
    Task {
        let outcome: Result<R, any Error>
        do { outcome = .success(try await work()) } catch { outcome = .failure(error) }
        result.withLock { $0 = outcome }
        done.signal()
    }
    done.wait()
    return try result.withLock { $0! }.get()
}
