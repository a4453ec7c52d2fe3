#if PostgreSQL
/// Schema version 9's directory (issue 51, part 7): which database holds each group, for a deployment
/// of several PostgreSQL primaries.
///
/// The sync tables are partitioned by group and every statement names one group, so a group lives
/// whole in one database. `kvsync_group_home` is read in the home database (the gateways'
/// `--database`); a group without a row lives there, so a deployment of one database never writes it.
/// `database` is a name that each gateway maps to an address (`kvtool sync gateway --group-database
/// NAME=URL`; `home` is the home database itself), never an address: the directory holds no host and
/// no password, and a gateway that was not given a name refuses that group's requests with a line
/// saying so. `NULL` holds the group (while it is moved): its requests are refused with 503 and
/// `Retry-After` until it is placed again. Only the owner writes it (``SyncDirectory``); gateways
/// read it (`SELECT` only), and it holds no data of any group, so it has no row-level security.
extension ServerSchema {
    static var directoryMigration: [String] {
        [
            """
            CREATE TABLE kvsync_group_home (
                group_id text PRIMARY KEY,
                database text CHECK (database ~ '^[A-Za-z0-9_-]{1,63}$'),
                placed_at timestamptz NOT NULL DEFAULT now())
            """,
            grants,
        ]
    }
}
#endif
