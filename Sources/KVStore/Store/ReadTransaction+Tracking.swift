/// The collections and defaults suites a read went through: what an observer of that read must watch.
///
/// ```swift
/// let (total, reads) = try store.read { tx in
///     try tx.trackingReads { try scores.count(in: tx) }
/// }
/// // reads.targets == [.collection("scores")]
/// if reads.isAffected(by: commit.mutations) { … }   // run the read again
/// ```
///
/// Reads through a ``KVCollection`` (its indexes included) and a ``SharedDefaults`` suite are
/// attributed to the collection or suite; a derived collection brings in the collection it is derived
/// from (writes to that one change it). Reads through a ``RawDatabase`` cannot be attributed, and make
/// the set incomplete: then every change may affect it.
public struct ReadSet: Hashable, Sendable {
    /// The collections and suites read.
    public var targets: Set<Mutation.Target>
    /// Whether every read was attributed (`false` after a read through a ``RawDatabase``).
    public var isComplete: Bool

    public init(targets: Set<Mutation.Target> = [], isComplete: Bool = true) {
        self.targets = targets
        self.isComplete = isComplete
    }

    /// Whether a change to `target` may change what was read.
    public func isAffected(by target: Mutation.Target) -> Bool {
        !isComplete || targets.contains(target)
    }

    /// Whether any of `mutations` may change what was read.
    public func isAffected(by mutations: some Sequence<Mutation>) -> Bool {
        mutations.contains { isAffected(by: $0.target) }
    }
}

/// Where a transaction collects its ``ReadSet`` while ``ReadTransaction/trackingReads(_:)`` runs.
final class ReadTracker {
    var reads = ReadSet()

    func note(_ target: Mutation.Target) { reads.targets.insert(target) }
    func noteUntracked() { reads.isComplete = false }
}

extension ReadTransaction {
    /// Runs `body` and returns its result with the collections and suites it read through this
    /// transaction (see ``ReadSet``). Tracking costs one set insertion per collection access, and
    /// nothing when no one tracks; at the end, one catalog lookup per collection read finds the
    /// collections derived ones come from.
    ///
    /// Valid only inside the transaction's closure, like the transaction itself. Calls may nest: an
    /// outer call also sees what the inner one read.
    ///
    /// - Throws: whatever `body` throws, or an error reading the catalog.
    public func trackingReads<R>(_ body: () throws -> R) throws -> (value: R, reads: ReadSet) {
        let outer = readTracker
        let tracker = ReadTracker()
        readTracker = tracker
        defer {
            readTracker = outer
            if let outer {
                outer.reads.targets.formUnion(tracker.reads.targets)
                if !tracker.reads.isComplete { outer.noteUntracked() }
            }
        }
        let value = try body()
        var pending = Array(tracker.reads.targets)
        while let target = pending.popLast() {
            guard case .collection(let name) = target,
                  let source = try Catalog.entry(named: name, kind: .collection, in: self)?.derivedFrom,
                  tracker.reads.targets.insert(.collection(source)).inserted else { continue }
            pending.append(.collection(source))
        }
        return (value, tracker.reads)
    }
}
