import Foundation
import KVStore
import SyncKit
#if PostgreSQL
import SyncKitPostgres
#endif

/// What an app tells kvtool about its data, so that kvtool's commands carry none of an app's code:
/// the typed replication targets it owns (with their conflict policies), what to do after a sync
/// changed them (its widget feed, published again), and the dashboard `kvtool serve` shows.
///
/// kvtool looks each of these up in ``KVToolApps/registered`` by the container's declarations
/// (``Replication/declaredTargets(in:)``, the catalog); a declaration no app claims gets the generic
/// treatment (an untyped collection, last writer wins; no dashboard). The demo's checklist app is
/// registered as any app would be, in `Apps/`.
protocol KVToolApp: Sendable {
    /// A name for messages.
    var name: String { get }
#if PostgreSQL
    /// The typed target for `target` if this app owns it (its value type and conflict policy).
    func replicatedTarget(_ target: Mutation.Target, in container: SharedContainer) throws -> ReplicatedTarget?
#endif
    /// What to run after a sync applied other devices' changes (to `changed`, or to everything after a
    /// resync: `nil`), made once per sync process; `nil` when the container holds none of this app's data.
    func afterSync(in container: SharedContainer) throws -> (@Sendable (_ changed: Set<Mutation.Target>?) -> KVToolNote?)?
    /// The dashboard `kvtool serve` draws, as its JSON object (`available`, `periods`…); `nil` when the
    /// container holds none of this app's data.
    func dashboard(of container: SharedContainer) throws -> JSONValue?
    /// The type this app stores in `collection`, which `kvtool put` checks values against and `kvtool
    /// check` decodes its values as; `nil` when the app does not own it.
    func typedValue(forCollection collection: String) -> TypedValue?
    /// The collections ``typedValue(forCollection:)`` answers for: the list `kvtool put --help` and the
    /// README give, read from here.
    var typedCollections: [String] { get }
    /// Those of ``typedCollections`` that only the app writes (it maintains their indexes or derived
    /// collections): `kvtool put` refuses them, and does not list them.
    var collectionsOnlyTheAppWrites: Set<String> { get }
    /// The checks `kvtool check` runs on the collections whose Swift types this app owns (recomputing
    /// their index entries and derived values from every record).
    var integrityChecks: [IntegrityCheck] { get }
}

extension KVToolApp {
#if PostgreSQL
    func replicatedTarget(_ target: Mutation.Target, in container: SharedContainer) throws -> ReplicatedTarget? { nil }
#endif
    func afterSync(in container: SharedContainer) throws -> (@Sendable (_ changed: Set<Mutation.Target>?) -> KVToolNote?)? { nil }
    func dashboard(of container: SharedContainer) throws -> JSONValue? { nil }
    func typedValue(forCollection collection: String) -> TypedValue? { nil }
    var typedCollections: [String] { [] }
    var collectionsOnlyTheAppWrites: Set<String> { [] }
    var integrityChecks: [IntegrityCheck] { [] }
}

/// One line kvtool prints for an app: a kind (`feed`, `error`) and the message.
struct KVToolNote: Sendable {
    var kind: String
    var message: String
}

/// The apps this kvtool knows.
enum KVToolApps {
    static let registered: [any KVToolApp] = [ChecklistApp(), SubscriptionsApp()]

    /// Every registered app's integrity checks.
    static var integrityChecks: [IntegrityCheck] { registered.flatMap(\.integrityChecks) }

    /// The collections `kvtool put` decodes as an app's type before it writes them: every registered
    /// app's typed collections but those only the app writes. `kvtool put --help` lists them, and a test
    /// checks the README's list against them and puts a value into each.
    static var putTargets: [String] {
        registered.flatMap { app in app.typedCollections.filter { !app.collectionsOnlyTheAppWrites.contains($0) } }
    }

    /// The type a registered app stores in `collection`, if one claims it.
    static func typedValue(forCollection collection: String) -> (app: String, type: TypedValue)? {
        for app in registered {
            if let typed = app.typedValue(forCollection: collection) { return (app.name, typed) }
        }
        return nil
    }

#if PostgreSQL
    /// The declared replication targets, typed by the app that owns each, untyped otherwise. A
    /// collection whose type an app registered (``typedValue(forCollection:)``) has every value that
    /// comes in checked as `kvtool check` checks it: one that fails is quarantined with the reason, not
    /// applied (issue 46: a pulled value that was not the type's was stored, and `check` then failed).
    static func replicatedTargets(of container: SharedContainer) throws -> [ReplicatedTarget] {
        let store = container.store
        var targets: [ReplicatedTarget] = []
        for target in try Replication.declaredTargets(in: store) {
            var replicated: ReplicatedTarget
            if let typed = try registered.lazy.compactMap({ try $0.replicatedTarget(target, in: container) }).first {
                replicated = typed
            } else {
                switch target {
                case .collection(let name): replicated = try .untypedCollection(named: name, in: store)
                case .defaults(let name): replicated = .defaults(try container.defaults(suite: name))
                }
            }
            if case .collection(let name) = target, let (app, typed) = typedValue(forCollection: name) {
                replicated = replicated.checkingValues(typed.incoming(app: app))
            }
            targets.append(replicated)
        }
        return targets
    }
#endif

    /// Every registered app's after-sync work for `container`, as one function.
    static func afterSync(in container: SharedContainer) throws -> @Sendable (Set<Mutation.Target>?) -> [KVToolNote] {
        let hooks = try registered.compactMap { try $0.afterSync(in: container) }
        return { changed in hooks.compactMap { $0(changed) } }
    }

    /// The first registered app's dashboard of `container`, or why there is none.
    static func dashboard(of container: SharedContainer) throws -> JSONValue {
        for app in registered {
            if let dashboard = try app.dashboard(of: container) { return dashboard }
        }
        return ["available": false,
                "reason": .string("no app registered with kvtool has a dashboard for this container (\(registered.map(\.name).joined(separator: ", ")))")]
    }
}
