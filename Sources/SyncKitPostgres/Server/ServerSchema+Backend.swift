#if PostgreSQL
/// Schema version 8 (issue 50): what an app's backend needs to see and shape synced data in SQL.
///
/// - ``jsonMigration`` (`ServerSchema+JSON.swift`): CBOR to `jsonb` and back, in PL/pgSQL.
/// - ``backendAccessMigration`` (`ServerSchema+BackendAccess.swift`): the `kvsync_backend` role, the
///   JSON view of the state, opt-in stored JSON columns, and server-authored writes.
/// - ``validatorMigration`` (`ServerSchema+Validators.swift`): validator functions per collection,
///   called inside the push, and `kvsync_push`'s `rejected` outcome.
extension ServerSchema {
    static var backendMigration: [String] { jsonMigration + backendAccessMigration + validatorMigration }
}
#endif
