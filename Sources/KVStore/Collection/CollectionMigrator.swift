/// A collection's migrations as a list, in the spirit of GRDB's `DatabaseMigrator`: registered in
/// order, each with an identifier. The collection's schema version is derived from the list (one
/// more than its length: a collection with no migrations is at version 1), and the identifiers
/// applied are recorded in its catalog entry (``CatalogEntry/migrations``), so a migration runs once.
///
/// ```swift
/// var migrator = CollectionMigrator<UUID, Trainer>()
/// migrator.registerMigration("level") { migration in
///     try migration.rewriteValues(from: TrainerV1.self) { _, old in Trainer(name: old.name, level: 1) }
/// }
/// let trainers = try store.collection("trainers", key: UUID.self, value: Trainer.self, migrator: migrator)
/// ```
///
/// Opening the collection runs the migrations appended since it was last opened, in order, in one write
/// transaction with the catalog's update: a failed migration leaves the collection as it was. A
/// collection created by this open starts at the list's end and runs none (there is nothing to migrate).
///
/// Migrations are appended; the applied ones are never removed, reordered or renamed: a list with
/// another identifier at a recorded position throws ``KVStoreError/catalogMismatch(collection:detail:)``
/// naming it, and one shorter than the migrations applied throws
/// ``KVStoreError/schemaTooNew(collection:stored:supported:)``, as an older program's would. A store migrated by the `schemaVersion:` form to version N opens with a list whose first
/// N − 1 migrations stand for the versions it went through: they do not run, and their identifiers are
/// recorded.
public struct CollectionMigrator<Key: OrderedKey, Value> {
    struct Migration {
        let identifier: String
        let migrate: (CollectionMigration<Key, Value>) throws -> Void
    }

    private(set) var migrations: [Migration] = []

    public init() {}

    /// Appends a migration. `identifier` names it in the catalog (1–200 bytes, unique in the list);
    /// `migrate` runs in the write transaction that opens the collection, with the collection's new
    /// codec and indexes, as the `migrate:` closure of the `schemaVersion:` form does.
    public mutating func registerMigration(_ identifier: String,
                                           migrate: @escaping (CollectionMigration<Key, Value>) throws -> Void) {
        migrations.append(Migration(identifier: identifier, migrate: migrate))
    }

    /// The identifiers, in the order registered.
    public var identifiers: [String] { migrations.map { $0.identifier } }

    /// The schema version the list stands for: the number of migrations plus one.
    public var schemaVersion: Int { migrations.count + 1 }

    /// Throws ``KVStoreError/invalidName(_:reason:)`` for an empty, overlong or repeated identifier.
    func validate(collection name: String) throws {
        var seen: Set<String> = []
        for identifier in identifiers {
            if let problem = CatalogEntry.migrationIdentifierProblem(identifier) {
                throw KVStoreError.invalidName(identifier, reason: "a migration of collection '\(name)': \(problem)")
            }
            if !seen.insert(identifier).inserted {
                throw KVStoreError.invalidName(identifier, reason: "collection '\(name)' registers this migration twice")
            }
        }
    }

    /// The migrations `stored` has not applied, in order (their indices are their positions in the list).
    ///
    /// - Throws: ``KVStoreError/catalogMismatch(collection:detail:)`` when a recorded migration has
    ///   another identifier at its position here (the list reordered, renamed or removed one);
    ///   ``KVStoreError/schemaTooNew(collection:stored:supported:)`` when the store applied more
    ///   migrations than the list has (a newer program migrated it, or the list lost its last ones).
    func pending(after stored: CatalogEntry) throws -> ArraySlice<Migration> {
        for (position, recorded) in (stored.migrations ?? []).enumerated()
            where position < migrations.count && migrations[position].identifier != recorded {
            throw KVStoreError.catalogMismatch(
                collection: stored.name,
                detail: "migration \(position + 1) is \(KVStoreError.quote(recorded)) in the store, \(KVStoreError.quote(migrations[position].identifier)) here: applied migrations are never reordered, renamed or removed")
        }
        guard stored.schemaVersion <= schemaVersion else {
            throw KVStoreError.schemaTooNew(collection: stored.name, stored: stored.schemaVersion, supported: schemaVersion)
        }
        return migrations[(stored.schemaVersion - 1)...]
    }
}
