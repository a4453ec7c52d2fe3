#if PostgreSQL
extension ServerSchema {
    /// Part of schema version 8 (backendMigration).
    static var jsonMigration: [String] { [] }
}
#endif
