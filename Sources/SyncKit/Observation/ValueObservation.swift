import KVStore

/// A value read from a store, observed as it changes: whichever process commits the change.
///
/// ```swift
/// let streak = ValueObservation.tracking { tx in try records.last(in: tx)?.value.streak }
///     .removeDuplicates()
/// for try await value in streak.values(in: container) {
///     render(value)              // now, then after each commit that changes it, in any process
/// }
/// ```
///
/// The closure is a read transaction's body, like the one given to `Store.read(_:)`. It runs once at
/// once, then again after commits that may have changed what it read: the observation records the
/// collections and defaults suites it read (`ReadTransaction.trackingReads(_:)`), and ignores commits
/// that touch none of them. Commits of this process are seen through the store's write hook; commits
/// of other processes through the container's ``ChangeNotifier``, with ``History`` telling which
/// collections they changed when history is enabled for everything the closure read (otherwise every
/// notification runs the closure again). Each run's value is delivered, even one equal to the
/// previous; ``removeDuplicates()`` (for `Equatable` values) or ``removeDuplicates(by:)`` asks for
/// equal ones to be left out, as GRDB's `ValueObservation` does.
///
/// See ``values(in:)`` for delivery and cancellation, and ``ObservedValue`` for an `Observable` model.
public struct ValueObservation<Value: Sendable>: Sendable {
    let fetch: @Sendable (ReadTransaction) throws -> Value
    let isDuplicate: (@Sendable (Value, Value) -> Bool)?

    /// Observes what `fetch` returns. Every value is delivered, even one equal to the previous:
    /// chain ``removeDuplicates()`` to leave those out.
    public static func tracking(_ fetch: @escaping @Sendable (ReadTransaction) throws -> Value) -> Self {
        Self(fetch: fetch, isDuplicate: nil)
    }

    /// The same observation, not delivering a value equal to the last one delivered.
    ///
    /// Until issue 48 an `Equatable` value was deduplicated by `tracking` itself; now it is asked for here.
    public func removeDuplicates() -> Self where Value: Equatable {
        Self(fetch: fetch, isDuplicate: { $0 == $1 })
    }

    /// The same observation, not delivering a value for which `isDuplicate(previous, new)` is true.
    public func removeDuplicates(by isDuplicate: @escaping @Sendable (Value, Value) -> Bool) -> Self {
        Self(fetch: fetch, isDuplicate: isDuplicate)
    }

    /// The observed values, as an async sequence: the current value first, then each new one.
    ///
    /// Observation starts when iteration starts (the closure and the reads run on the process's
    /// blocking pool, never on the cooperative pool; the process's one watcher thread waits for the
    /// changes of every observation), and ends when iteration ends or its task is cancelled: the
    /// inotify watch is closed. If the consumer is slower than the changes,
    /// only the newest value waits for it. An error thrown by the closure or the store ends the
    /// sequence with that error.
    public func values(in container: SharedContainer) -> Values {
        values(in: container.store, notifier: ChangeNotifier(container: container))
    }

    /// The observed values of `store`, woken by `notifier`'s ``ChangeNotifier/changes`` posts for
    /// commits of other processes; with no notifier, only commits of this process are seen.
    public func values(in store: Store, notifier: ChangeNotifier?) -> Values {
        Values(observation: self, store: store, notifier: notifier)
    }

    /// The sequence ``ValueObservation/values(in:)`` returns. Iterate it once.
    public struct Values: AsyncSequence, Sendable {
        public typealias Element = Value
        let observation: ValueObservation
        let store: Store
        let notifier: ChangeNotifier?

        public func makeAsyncIterator() -> AsyncThrowingStream<Value, any Error>.Iterator {
            let (stream, continuation) = AsyncThrowingStream.makeStream(
                of: Value.self, throwing: (any Error).self, bufferingPolicy: .bufferingNewest(1))
            ObservationDriver.start(observation, store: store, notifier: notifier, continuation: continuation)
            return stream.makeAsyncIterator()
        }
    }
}
