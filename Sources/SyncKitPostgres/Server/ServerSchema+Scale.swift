#if PostgreSQL
/// Schema version 9 (issue 51): scale out.
///
/// - ``wakeMigration`` (`ServerSchema+Wake.swift`): `kvsync_push` revision 7, which no longer notifies
///   inside its transaction, and the newest sequence of a list of groups for the gateways' poll.
/// - ``directoryMigration`` (`ServerSchema+Directory.swift`): the directory from group to database.
extension ServerSchema {
    static var scaleMigration: [String] { wakeMigration + directoryMigration }
}
#endif
