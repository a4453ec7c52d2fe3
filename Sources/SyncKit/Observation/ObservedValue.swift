import KVStore
import Observation

/// An `Observable` model of one ``ValueObservation``: its ``value`` follows the store, whichever
/// process commits, and SwiftUI views or `withObservationTracking` see each change.
///
/// ```swift
/// let streak = try ObservedValue(.tracking { tx in try stats.get("streak", in: tx) ?? 0 }.removeDuplicates(), in: container)
/// withObservationTracking { draw(streak.value) } onChange: { scheduleRedraw() }
/// ```
///
/// The first value is read when the model is made; later ones arrive from the process's blocking pool
/// (``KVStore/BlockingPool``), so `onChange` runs there (hop to your UI's actor if you need to). Observation stops with
/// ``cancel()`` or when the model is released. Each value the observation delivers is a change of
/// ``value`` (equal ones too, unless the observation removes duplicates). A model is safe to use from any thread. To drive a
/// model of your own instead, iterate ``ValueObservation/values(in:)`` in a task and assign.
public final class ObservedValue<Value: Sendable>: Observable, Sendable {
    private let registrar = ObservationRegistrar()
    private let state: Locked<(value: Value, error: (any Error)?)>
    private let task = Locked<Task<Void, Never>?>(nil)

    /// The latest value.
    public var value: Value {
        registrar.access(self, keyPath: \.value)
        return state.withLock { $0.value }
    }

    /// The error that ended the observation, if one did.
    public var error: (any Error)? {
        registrar.access(self, keyPath: \.error)
        return state.withLock { $0.error }
    }

    /// Observes `observation` in `container`, reading its first value now.
    ///
    /// - Throws: whatever the observation's closure or the store throws for the first value.
    public convenience init(_ observation: ValueObservation<Value>, in container: SharedContainer) throws {
        try self.init(observation, in: container.store, notifier: ChangeNotifier(container: container))
    }

    /// Observes `observation` in `store`, woken by `notifier` for other processes' commits.
    public init(_ observation: ValueObservation<Value>, in store: Store, notifier: ChangeNotifier?) throws {
        state = Locked((try store.read { tx in try observation.fetch(tx) }, nil))
        let values = observation.values(in: store, notifier: notifier)
        task.withLock { $0 = Task.detached { [weak self] in
            do {
                for try await value in values {
                    guard let self else { return }
                    if let isDuplicate = observation.isDuplicate, isDuplicate(self.state.withLock({ $0.value }), value) { continue }
                    self.registrar.withMutation(of: self, keyPath: \.value) { self.state.withLock { $0.value = value } }
                }
            } catch {
                guard let self else { return }
                self.registrar.withMutation(of: self, keyPath: \.error) { self.state.withLock { $0.error = error } }
            }
        } }
    }

    /// Stops observing; ``value`` keeps its last value.
    public func cancel() {
        task.withLock { $0?.cancel() }
    }

    deinit { cancel() }
}
