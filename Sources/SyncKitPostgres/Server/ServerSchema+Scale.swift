#if PostgreSQL
/// Schema version 9 (issue 51, scale out): the directory from group to database
/// (``directoryMigration``, in `ServerSchema+Directory.swift`).
extension ServerSchema {
    static var scaleMigration: [String] { directoryMigration }
}
#endif
