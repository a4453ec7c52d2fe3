#if PostgreSQL
extension ServerSchema {
    /// Part of schema version 9 (``scaleMigration``): wake-ups after the commit (issue 51).
    ///
    /// - `kvsync_push` revision 7: revision 6 without `pg_notify` (``adoptRows(notifying:)``). A
    ///   transaction that notified takes a lock of the whole cluster while it commits, so every push
    ///   of every group committed one at a time behind it; the pusher (a gateway, a direct replicator)
    ///   now sends the wake-up after the commit, coalesced per group (``WakeUps``). The server-authored
    ///   writes (`kvsync_server_write`) keep notifying: their callers are SQL backends that send none.
    /// - ``groupEndsFunction``: the newest sequence of each of a list of groups, for a gateway's poll
    ///   of the groups it has live streams for (a wake-up lost costs at most the poll's interval).
    static var wakeMigration: [String] {
        [
            pushFunction(scopeChecks: scopeChecks),
            groupEndsFunction,
            "REVOKE ALL ON FUNCTION \(groupEndsSignature) FROM PUBLIC",
            grants,
        ]
    }

    /// `kvsync_group_ends`'s name with its argument types (its grants, `to_regprocedure`).
    static let groupEndsSignature = "kvsync_group_ends(text[])"

    /// The most groups one call of `kvsync_group_ends` reads (a gateway asks in pieces of this many).
    static let groupEndsLimit = 1_000

    /// `kvsync_group_ends(groups)`: `(group_id, last_seq)` of those of `groups` that have pushed (at
    /// most ``groupEndsLimit``). The gateway's role reads the groups' table only in a transaction
    /// scoped to one group (row-level security), so it reads the ends of many through this, which
    /// shows nothing but where each log ends.
    static let groupEndsFunction = """
        CREATE FUNCTION kvsync_group_ends(p_groups text[]) RETURNS TABLE (group_id text, last_seq bigint)
        LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
            SELECT g.group_id, g.last_seq FROM kvsync_groups g
            WHERE g.group_id = ANY (p_groups[1:\(groupEndsLimit)])
        $$
        """
}
#endif
