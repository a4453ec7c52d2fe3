/// A check that needs what only a layer above KVStore knows: the Swift types of a collection (to
/// recompute its index entries and derived values), or files of its own. The layer that owns the types
/// declares its checks; a tool such as `kvtool check` runs every check it is given, and KVStore's own
/// walk (``Store/checkIntegrity(maxProblems:progress:)``) stays free of them.
///
/// ```swift
/// extension IntegrityCheck {
///     public static let checklist = IntegrityCheck(name: "dailyRecords", collections: ["dailyRecords"]) { store, limit in
///         let records = try ChecklistStore(store: store).records
///         return try store.read { try records.checkMaintainedData(in: $0, maxProblems: limit) }
///     }
/// }
/// ```
public struct IntegrityCheck: Sendable {
    /// What the check covers, for the tool's notes (`dailyRecords`).
    public var name: String
    /// The collections the check needs: it applies only to a store whose catalog has every one.
    public var collections: [String]
    /// Runs the check against a store opened outside every transaction, listing at most
    /// `maxProblems` problems.
    public var run: @Sendable (_ store: Store, _ maxProblems: Int) throws -> [IntegrityProblem]

    public init(name: String, collections: [String],
                run: @escaping @Sendable (_ store: Store, _ maxProblems: Int) throws -> [IntegrityProblem]) {
        self.name = name
        self.collections = collections
        self.run = run
    }

    /// Whether the check applies to a store whose catalog names these collections.
    public func applies(toCollections names: Set<String>) -> Bool {
        collections.allSatisfy(names.contains)
    }
}
