#if PostgreSQL
import Logging
import PostgresNIO
import SyncWire

/// The server's tables, created and migrated by the library. Every statement is fixed text: data only
/// ever travels as bind parameters.
///
/// - `kvsync_groups`: one row per group; its `FOR UPDATE` lock serializes the pushes of a group, so
///   sequence numbers become visible in order and a cursor never skips a change still in flight.
/// - `kvsync_changes`: the change log, `seq bigserial`, unique on (group, device, token): a push sent
///   twice is applied once.
/// - `kvsync_state`: the current value (or tombstone) of every key, with its version (the `seq` that
///   wrote it), clock and device.
/// - `kvsync_schema`: the schema version and, from version 2, the server's id (random, made once): a
///   device that finds another id than the one it synced with knows it faces a new server.
/// - From version 4, `kvsync_tokens` (device credentials, their SHA-256 only) and row-level security on
///   every table, scoped by `kvsync.group` (the sync gateway's transactions); from version 5, the three
///   sync tables are hash-partitioned by group.
/// - `kvsync_push(...)`: applies one batch: for each change, `duplicate` (sent before), `conflict` (its
///   base is not the current version: the server's row comes back) or `applied`. From version 3, a
///   batch with a stamp further ahead of the server's clock than the device's `maxClockSkew` is
///   refused whole with one `clock_ahead` row (how far ahead, in milliseconds).
/// - From version 7 (issue 49), `kvsync_blobs` and `kvsync_blob_chunks`: the bytes of the group's
///   files, content-addressed and chunked, with the functions that upload, read and collect them
///   (``blobMigration``, in `ServerSchema+Blobs.swift`); `kvsync_push` answers `missing_blob` for a
///   manifest row whose file's bytes the server has not got whole (revision 5).
/// - From version 9 (issue 51), `kvsync_group_home`: which database of a deployment holds each group
///   (``directoryMigration``, in `ServerSchema+Directory.swift`; ``SyncDirectory``).
/// - `kvsync_groups.last_seq` is where the log ends for devices: a push moves it, under the group's
///   lock, to the greatest row the sequence has passed (``adoptRows``). Devices read no row past it
///   (``ServerStatements/changes(group:after:limit:maxBytes:)``), whatever else the table holds.
enum ServerSchema {
    /// The schema version this library writes and reads: the number of ``migrations`` (a new one is
    /// a new version, with nothing else to edit in step).
    static var version: Int { migrations.count }
    /// Hash partitions of each sync table (schema version 5).
    static let partitions = 16
    /// The role a sync gateway's transactions run as (`SET LOCAL ROLE`): it owns nothing, bypasses no
    /// row-level security, and sees only the rows of the group its transaction is scoped to.
    static let gatewayRole = "kvsync_gateway"
    /// The `LISTEN`/`NOTIFY` channel; the payload is the group id.
    static let channel = "kvsync"
    /// `pg_advisory_xact_lock` key under which migrations run (one migrator at a time).
    static let migrationLock: Int64 = 0x6B76_7379_6E63   // "kvsync"

    /// The body of `kvsync_push` version 1, after its checks: the group's lock, then ``pushLoopBody``.
    static let pushLoop = """
        INSERT INTO kvsync_groups (group_id) VALUES (p_group) ON CONFLICT DO NOTHING;
        PERFORM 1 FROM kvsync_groups g WHERE g.group_id = p_group FOR UPDATE;
        """ + pushLoopBody

    /// The loop of `kvsync_push` version 1, run while the function holds the group's lock: one outcome
    /// per change, then the group's last sequence number and a notification. (Kept as version 1 made
    /// it; later revisions run ``pushLoopNumbered``.)
    static let pushLoopBody = """
        FOR k IN 1..n LOOP
            idx := k;
            SELECT c.seq INTO found_seq FROM kvsync_changes c
                WHERE c.group_id = p_group AND c.device = p_device AND c.token = p_tokens[k];
            IF FOUND THEN
                outcome := 'duplicate'; version := found_seq; s_value := NULL; s_hlc := NULL; s_device := NULL;
                RETURN NEXT;
                CONTINUE;
            END IF;
            SELECT * INTO cur FROM kvsync_state s
                WHERE s.group_id = p_group AND s.kind = p_kinds[k] AND s.name = p_names[k] AND s.key = p_keys[k];
            IF FOUND AND cur.version <> p_bases[k]
               AND NOT (cur.device = p_device AND cur.token <= p_tokens[k]) THEN
                outcome := 'conflict'; version := cur.version; s_value := cur.value; s_hlc := cur.hlc;
                s_device := cur.device;
                RETURN NEXT;
                CONTINUE;
            END IF;
            v := CASE WHEN p_deleted[k] THEN NULL ELSE p_values[k] END;
            INSERT INTO kvsync_changes (group_id, device, token, kind, name, key, value, hlc, base)
                VALUES (p_group, p_device, p_tokens[k], p_kinds[k], p_names[k], p_keys[k], v, p_hlcs[k], p_bases[k])
                RETURNING seq INTO new_seq;
            INSERT INTO kvsync_state AS s (group_id, kind, name, key, value, version, hlc, device, token)
                VALUES (p_group, p_kinds[k], p_names[k], p_keys[k], v, new_seq, p_hlcs[k], p_device, p_tokens[k])
                ON CONFLICT (group_id, kind, name, key) DO UPDATE SET value = EXCLUDED.value,
                    version = EXCLUDED.version, hlc = EXCLUDED.hlc, device = EXCLUDED.device,
                    token = EXCLUDED.token, updated_at = now();
            last := new_seq;
            outcome := 'applied'; version := new_seq; s_value := NULL; s_hlc := NULL; s_device := NULL;
            RETURN NEXT;
        END LOOP;
        IF last IS NOT NULL THEN
            UPDATE kvsync_groups SET last_seq = last WHERE group_id = p_group;
            PERFORM pg_notify('kvsync', p_group);
        END IF;
        RETURN;
        """

    /// The loop of `kvsync_push` from revision 4, run while the function holds the group's lock: one
    /// outcome per change, as ``pushLoopBody``, but each change's sequence number is drawn past any
    /// row of the group that already holds it, and the log then ends at ``adoptRows``.
    ///
    /// Why: only a push writes the log in order, but anyone with write access to the tables (the
    /// attacker RELIABILITY.md names), or a restore that did not set the sequence, can leave rows
    /// numbered past `last_seq`. Such a row must neither refuse the next push (a primary key taken)
    /// nor come before it in the log once devices read past it.
    ///
    /// Also from revision 4, a change on another base than the current version is no conflict when
    /// the current row is the same device's with an earlier token (its own later write) only if its
    /// clock is not older than that row's: a device that started over sends every key again with the
    /// clock of the version it knew, and a value it took from a row planted in the log (stamped in
    /// the past) must not go over its own newer write as if it were later (found by the server-state
    /// fuzzer). Such a change is a conflict, settled by clock.
    static let pushLoopNumbered = """
        FOR k IN 1..n LOOP
            idx := k;
            SELECT c.seq INTO found_seq FROM kvsync_changes c
                WHERE c.group_id = p_group AND c.device = p_device AND c.token = p_tokens[k];
            IF FOUND THEN
                outcome := 'duplicate'; version := found_seq; s_value := NULL; s_hlc := NULL; s_device := NULL;
                RETURN NEXT;
                CONTINUE;
            END IF;
            SELECT * INTO cur FROM kvsync_state s
                WHERE s.group_id = p_group AND s.kind = p_kinds[k] AND s.name = p_names[k] AND s.key = p_keys[k];
            IF FOUND AND cur.version <> p_bases[k]
               AND NOT (cur.device = p_device AND cur.token <= p_tokens[k] AND cur.hlc <= p_hlcs[k]) THEN
                outcome := 'conflict'; version := cur.version; s_value := cur.value; s_hlc := cur.hlc;
                s_device := cur.device;
                RETURN NEXT;
                CONTINUE;
            END IF;
            -- A manifest row whose file's bytes the server has not got complete (revision 5).
            IF k = ANY(missing_blobs) THEN
                outcome := 'missing_blob'; version := NULL; s_value := NULL; s_hlc := NULL; s_device := NULL;
                RETURN NEXT;
                CONTINUE;
            END IF;
            v := CASE WHEN p_deleted[k] THEN NULL ELSE p_values[k] END;
            -- Refused by a validator of its collection, with the current row (revision 6; cur holds
            -- NULLs when the key has none).
            reason := \(validation(kind: "p_kinds[k]", name: "p_names[k]", key: "p_keys[k]", value: "v", current: "cur.value"));
            IF reason IS NOT NULL THEN
                outcome := 'rejected: ' || reason; version := cur.version; s_value := cur.value; s_hlc := cur.hlc;
                s_device := cur.device;
                RETURN NEXT;
                CONTINUE;
            END IF;
            -- A number another row of the group holds is stepped over (each step draws one, so this
            -- ends within as many steps as the group has rows past the sequence).
            LOOP
                new_seq := nextval('kvsync_changes_seq_seq');
                EXIT WHEN NOT EXISTS (SELECT FROM kvsync_changes c WHERE c.group_id = p_group AND c.seq = new_seq);
            END LOOP;
            INSERT INTO kvsync_changes (seq, group_id, device, token, kind, name, key, value, hlc, base)
                VALUES (new_seq, p_group, p_device, p_tokens[k], p_kinds[k], p_names[k], p_keys[k], v, p_hlcs[k], p_bases[k]);
            INSERT INTO kvsync_state AS s (group_id, kind, name, key, value, version, hlc, device, token)
                VALUES (p_group, p_kinds[k], p_names[k], p_keys[k], v, new_seq, p_hlcs[k], p_device, p_tokens[k])
                ON CONFLICT (group_id, kind, name, key) DO UPDATE SET value = EXCLUDED.value,
                    version = EXCLUDED.version, hlc = EXCLUDED.hlc, device = EXCLUDED.device,
                    token = EXCLUDED.token, updated_at = now();
            outcome := 'applied'; version := new_seq; s_value := NULL; s_hlc := NULL; s_device := NULL;
            RETURN NEXT;
        END LOOP;
        """

    /// The end of `kvsync_push` from revision 4, run while the function holds the group's lock: the
    /// log's last sequence number becomes the greatest of the group's rows that the sequence has
    /// passed, and devices are told if it moved (``adoptRows(notifying:)``).
    ///
    /// The sequence bounds it: every number drawn from now on is greater than its last value, so a
    /// row at or below it can never be followed by a push numbered before it, and devices may read
    /// up to it. That takes in this batch's rows, and also rows someone else wrote between `last_seq`
    /// and the sequence (a restore that did not update `last_seq`: repaired by the next push). A row
    /// numbered past the sequence stays out of the log (devices read only up to `last_seq`) until the
    /// sequence passes it: it is then taken in, in its place. (With the sequence's default cache of 1,
    /// its last value is the last number any session drew.)
    static let adoptRows = adoptRows(notifying: true)

    /// ``adoptRows``, with the notification in the transaction (`notifying`: revisions 4 to 6 of
    /// `kvsync_push`, and the server-authored writes, whose SQL callers send no wake-up of their own)
    /// or without it (`kvsync_push` from revision 7, issue 51: whoever pushed sends the wake-up after
    /// the commit, ``WakeUps``). A transaction that notified takes a lock shared by the whole cluster
    /// while it commits, so the pushes of all groups would commit one at a time.
    static func adoptRows(notifying: Bool) -> String {
        """
        SELECT max(c.seq) INTO last FROM kvsync_changes c
            WHERE c.group_id = p_group AND c.seq > previous
              AND c.seq <= coalesce(pg_sequence_last_value('kvsync_changes_seq_seq'), 0);
        IF last IS NOT NULL THEN
            UPDATE kvsync_groups SET last_seq = last WHERE group_id = p_group;
        \(notifying ? "    PERFORM pg_notify('kvsync', p_group);\n" : "")END IF;
        RETURN;
        """
    }

    /// The body of `kvsync_push` for a batch whose keys and tokens are all distinct (what replicators
    /// send: one change per key), run while the function holds the group's lock: the same outcomes as
    /// ``pushLoopBody`` in a few set-based statements,
    /// about five times faster on partitioned tables (a plpgsql loop plans each of its statements per
    /// change, for every partition). Every lookup is an index probe (`LATERAL … LIMIT 1`), so a batch
    /// costs the same however large its group's log.
    static let pushSet = """
        RETURN QUERY
        WITH input AS (
            SELECT u.i::integer AS i, u.tok, u.kind, u.name, u.key, CASE WHEN u.del THEN NULL ELSE u.val END AS value,
                   u.hlc, u.base, coalesce(u.i::integer = ANY(missing_blobs), false) AS missing
            FROM unnest(p_tokens, p_kinds, p_names, p_keys, p_values, p_deleted, p_hlcs, p_bases)
                 WITH ORDINALITY AS u(tok, kind, name, key, val, del, hlc, base, i)),
        classified AS (
            SELECT input.*, d.seq AS sent_seq, s.version AS cur_version, s.value AS cur_value, s.hlc AS cur_hlc,
                   s.device AS cur_device,
                   coalesce(s.version <> input.base AND NOT (s.device = p_device AND s.token <= input.tok
                                                                     AND s.hlc <= input.hlc), false) AS conflicting
            FROM input
            LEFT JOIN LATERAL (SELECT c.seq FROM kvsync_changes c
                               WHERE CASE WHEN input.tok < 4611686018427387904 THEN input.tok <= sent_low
                                          ELSE input.tok <= sent_high END
                                 AND c.group_id = p_group AND c.device = p_device AND c.token = input.tok LIMIT 1) d ON true
            LEFT JOIN LATERAL (SELECT st.version, st.value, st.hlc, st.device, st.token FROM kvsync_state st
                               WHERE st.group_id = p_group AND st.kind = input.kind AND st.name = input.name
                                 AND st.key = input.key LIMIT 1) s ON true),
        -- The validators' reasons for the changes that would apply (revision 6), in batch order.
        checked AS (
            SELECT c.*, CASE WHEN c.sent_seq IS NULL AND NOT c.conflicting AND NOT c.missing THEN
                        \(validation(kind: "c.kind", name: "c.name", key: "c.key", value: "c.value", current: "c.cur_value")) END AS reason
            FROM (SELECT * FROM classified ORDER BY i) AS c),
        -- Sequence numbers in batch order, drawn for the changes that apply (CASE draws no other).
        numbered AS (
            SELECT c.*, CASE WHEN c.sent_seq IS NULL AND NOT c.conflicting AND NOT c.missing AND c.reason IS NULL
                             THEN nextval('kvsync_changes_seq_seq') END AS seq
            FROM (SELECT * FROM checked ORDER BY i) AS c),
        inserted AS (
            INSERT INTO kvsync_changes (seq, group_id, device, token, kind, name, key, value, hlc, base)
            SELECT n.seq, p_group, p_device, n.tok, n.kind, n.name, n.key, n.value, n.hlc, n.base FROM numbered n
            WHERE n.seq IS NOT NULL),
        -- The state: rows the classification found are updated, the others inserted (no upsert:
        -- every writer of a group's state holds the group's lock, so neither set can change meanwhile).
        updated AS (
            UPDATE kvsync_state s SET value = n.value, version = n.seq, hlc = n.hlc, device = p_device,
                token = n.tok, updated_at = now()
            FROM numbered n
            WHERE n.seq IS NOT NULL AND n.cur_version IS NOT NULL
              AND s.group_id = p_group AND s.kind = n.kind AND s.name = n.name AND s.key = n.key),
        created AS (
            INSERT INTO kvsync_state (group_id, kind, name, key, value, version, hlc, device, token)
            SELECT p_group, n.kind, n.name, n.key, n.value, n.seq, n.hlc, p_device, n.tok FROM numbered n
            WHERE n.seq IS NOT NULL AND n.cur_version IS NULL)
        SELECT n.i,
               CASE WHEN n.sent_seq IS NOT NULL THEN 'duplicate' WHEN n.conflicting THEN 'conflict'
                    WHEN n.missing THEN 'missing_blob' WHEN n.reason IS NOT NULL THEN 'rejected: ' || n.reason ELSE 'applied' END,
               CASE WHEN n.sent_seq IS NOT NULL OR n.conflicting OR NOT n.missing THEN coalesce(n.sent_seq, n.seq, n.cur_version) END,
               CASE WHEN (n.sent_seq IS NULL AND n.conflicting) OR n.reason IS NOT NULL THEN n.cur_value END,
               CASE WHEN (n.sent_seq IS NULL AND n.conflicting) OR n.reason IS NOT NULL THEN n.cur_hlc END,
               CASE WHEN (n.sent_seq IS NULL AND n.conflicting) OR n.reason IS NOT NULL THEN n.cur_device END
        FROM numbered n
        ORDER BY n.i;
        """

    /// `kvsync_push`'s parameters today, each name with its type: written once, for its definition
    /// (``pushDeclaration``) and for the lookup of the function by its types (``pushSignature``).
    static let pushParameters: [(name: String, type: String)] = [
        ("p_group", "text"), ("p_device", "text"), ("p_tokens", "bigint[]"), ("p_kinds", "text[]"),
        ("p_names", "text[]"), ("p_keys", "bytea[]"), ("p_values", "bytea[]"), ("p_deleted", "boolean[]"),
        ("p_hlcs", "bigint[]"), ("p_bases", "bigint[]"), ("p_max_skew_ms", "bigint"),
    ]
    /// `kvsync_push(p_group text, …)`, as its definition names it.
    static var pushDeclaration: String { "kvsync_push(\(pushParameters.map { "\($0.name) \($0.type)" }.joined(separator: ", ")))" }
    /// `kvsync_push(text, …)`, as PostgreSQL names the function (`to_regprocedure`, `DROP FUNCTION`).
    static var pushSignature: String { "kvsync_push(\(pushParameters.map(\.type).joined(separator: ", ")))" }

    /// The revision of `kvsync_push`'s body, marked in its source. A revision that answers the same
    /// (a faster body) does not change the schema's version, so that devices on the previous release
    /// keep syncing; ``migrate(_:logger:)`` replaces an older body when its user may.
    static let pushRevision = "kvsync_push revision 8"

    /// The mark of the body `kvtool bench pushers` installs to compare (``pushFunction(scopeChecks:wakeInside:)``).
    static let notifyingInsideMark = "kvsync_push notifying inside its transaction, for kvtool bench pushers"

    /// The checks a gateway's scoped transaction adds to `kvsync_push` (version 4 on; the device from
    /// version 6).
    static let scopeChecks = """
        -- A transaction scoped to a group (a gateway's) pushes to that group only, as the device of
        -- its credential only, and a read-only credential's never.
        IF coalesce(\(ServerSetting.group.current), '') <> '' AND \(ServerSetting.group.current) <> p_group THEN
            RAISE EXCEPTION 'kvsync_push: this transaction is scoped to another group' USING ERRCODE = '42501';
        END IF;
        IF coalesce(\(ServerSetting.device.current), '') <> '' AND \(ServerSetting.device.current) <> p_device THEN
            RAISE EXCEPTION 'kvsync_push: this transaction is scoped to another device' USING ERRCODE = '42501';
        END IF;
        IF coalesce(\(ServerSetting.readOnly.current), '') = 'on' THEN
            RAISE EXCEPTION 'kvsync_push: this credential is read-only' USING ERRCODE = '42501';
        END IF;
    """

    /// The SQLSTATE of a push that repeats a (device, token) with another key or value.
    static let deviceInUseState = "KV001"

    /// Statements that take the schema from version `index` to `index + 1`.
    static let migrations: [[String]] = [
        [
            """
            CREATE TABLE kvsync_groups (
                group_id text PRIMARY KEY,
                last_seq bigint NOT NULL DEFAULT 0,
                pruned_through bigint NOT NULL DEFAULT 0)
            """,
            """
            CREATE TABLE kvsync_changes (
                seq bigserial PRIMARY KEY,
                group_id text NOT NULL,
                device text NOT NULL,
                token bigint NOT NULL,
                kind text NOT NULL,
                name text NOT NULL,
                key bytea NOT NULL,
                value bytea,
                hlc bigint NOT NULL,
                base bigint NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now(),
                UNIQUE (group_id, device, token))
            """,
            "CREATE INDEX kvsync_changes_group_seq ON kvsync_changes (group_id, seq)",
            """
            CREATE TABLE kvsync_state (
                group_id text NOT NULL,
                kind text NOT NULL,
                name text NOT NULL,
                key bytea NOT NULL,
                value bytea,
                version bigint NOT NULL,
                hlc bigint NOT NULL,
                device text NOT NULL,
                token bigint NOT NULL,
                updated_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (group_id, kind, name, key))
            """,
            """
            CREATE FUNCTION kvsync_push(p_group text, p_device text, p_tokens bigint[], p_kinds text[],
                                        p_names text[], p_keys bytea[], p_values bytea[], p_deleted boolean[],
                                        p_hlcs bigint[], p_bases bigint[])
            RETURNS TABLE (idx integer, outcome text, version bigint, s_value bytea, s_hlc bigint, s_device text)
            LANGUAGE plpgsql AS $$
            DECLARE
                n integer := coalesce(array_length(p_tokens, 1), 0);
                cur kvsync_state%ROWTYPE;
                found_seq bigint;
                new_seq bigint;
                last bigint := NULL;
                v bytea;
            BEGIN
                \(pushLoop)
            END
            $$
            """,
        ],
        [
            // A volatile default: the one row gets its own random id, and so does every new server.
            "ALTER TABLE kvsync_schema ADD COLUMN server_id uuid NOT NULL DEFAULT gen_random_uuid()",
        ],
        [
            // Version 3: kvsync_push refuses a batch stamped further ahead of the server's clock than
            // the device's bound (`p_max_skew_ms`), answering one 'clock_ahead' row.
            "DROP FUNCTION IF EXISTS kvsync_push(text, text, bigint[], text[], text[], bytea[], bytea[], boolean[], bigint[], bigint[])",
            pushFunction(scopeChecks: ""),
        ],
        [
            // Version 4: device credentials, and the sync gateway's isolation. Every kvsync table has
            // row-level security; a policy lets a role that does not own the tables see and write only
            // the rows of the group its transaction is scoped to (`kvsync.group`). The owner (the
            // direct path, the administration commands) bypasses it, as owners do unless forced.
            """
            CREATE TABLE kvsync_tokens (
                id bigserial PRIMARY KEY,
                group_id text NOT NULL,
                device text,
                hash bytea NOT NULL UNIQUE,
                read_only boolean NOT NULL DEFAULT false,
                created_at timestamptz NOT NULL DEFAULT now(),
                expires_at timestamptz,
                revoked_at timestamptz)
            """,
            "CREATE INDEX kvsync_tokens_group ON kvsync_tokens (group_id, device)",
            "ALTER TABLE kvsync_tokens ENABLE ROW LEVEL SECURITY",
            "ALTER TABLE kvsync_groups ENABLE ROW LEVEL SECURITY",
            "ALTER TABLE kvsync_changes ENABLE ROW LEVEL SECURITY",
            "ALTER TABLE kvsync_state ENABLE ROW LEVEL SECURITY",
            "ALTER TABLE kvsync_schema ENABLE ROW LEVEL SECURITY",
            "CREATE POLICY kvsync_schema_read ON kvsync_schema FOR SELECT USING (true)",
            groupScopePolicy(on: "kvsync_groups"),
            groupScopePolicy(on: "kvsync_changes"),
            groupScopePolicy(on: "kvsync_state"),
            // The one way a gateway reads kvsync_tokens (it has no privilege on the table): the row of
            // one SHA-256, which the gateway compares with its own in constant time.
            """
            CREATE FUNCTION kvsync_authenticate(p_hash bytea)
            RETURNS TABLE (id bigint, group_id text, device text, read_only boolean, hash bytea,
                           expired boolean, revoked boolean, expires_at timestamptz)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
                SELECT t.id, t.group_id, t.device, t.read_only, t.hash,
                       t.expires_at IS NOT NULL AND t.expires_at <= now(), t.revoked_at IS NOT NULL, t.expires_at
                FROM kvsync_tokens t WHERE t.hash = p_hash
            $$
            """,
            "REVOKE ALL ON FUNCTION kvsync_authenticate(bytea) FROM PUBLIC",
            // The credentials revoked in the last `p_seconds`: a gateway closes their live streams.
            """
            CREATE FUNCTION kvsync_revoked_recently(p_seconds double precision)
            RETURNS SETOF bigint
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
                SELECT t.id FROM kvsync_tokens t
                WHERE t.revoked_at IS NOT NULL AND t.revoked_at > now() - make_interval(secs => p_seconds)
            $$
            """,
            "REVOKE ALL ON FUNCTION kvsync_revoked_recently(double precision) FROM PUBLIC",
            "CREATE INDEX kvsync_tokens_revoked ON kvsync_tokens (revoked_at) WHERE revoked_at IS NOT NULL",
            pushFunction(scopeChecks: scopeChecks),
            // The gateway's role: created when the migrating user may (CREATEROLE); otherwise an
            // administrator creates it and runs `kvtool sync token issue` (which grants) once.
            """
            DO $$ BEGIN
                IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '\(gatewayRole)') THEN
                    BEGIN
                        CREATE ROLE \(gatewayRole) NOLOGIN;
                    EXCEPTION WHEN insufficient_privilege THEN
                        RAISE NOTICE 'kvsync: cannot create role \(gatewayRole); the gateway needs it';
                    END;
                END IF;
            END $$
            """,
            grants,
        ],
        [
            // Version 5: the three sync tables are hash-partitioned by group (PostgreSQL's declarative
            // partitioning, 16 partitions each). Every statement names one group, so each touches one
            // partition, and the same layout distributes by group_id with Citus. The rows are moved
            // over in this transaction; sequence numbers are kept.
            "ALTER TABLE kvsync_groups RENAME TO kvsync_groups_v4",
            "ALTER TABLE kvsync_changes RENAME TO kvsync_changes_v4",
            "ALTER TABLE kvsync_state RENAME TO kvsync_state_v4",
            // (Partitions of the old tables, if they had any, step aside for the new ones' names.)
            """
            DO $$ DECLARE child regclass; BEGIN
                FOR child IN SELECT inhrelid::regclass FROM pg_inherits
                             WHERE inhparent IN ('kvsync_groups_v4'::regclass, 'kvsync_changes_v4'::regclass, 'kvsync_state_v4'::regclass) LOOP
                    EXECUTE format('ALTER TABLE %s RENAME TO %s', child, child::text || '_v4');
                END LOOP;
            END $$
            """,
            """
            CREATE TABLE kvsync_groups (
                group_id text PRIMARY KEY,
                last_seq bigint NOT NULL DEFAULT 0,
                pruned_through bigint NOT NULL DEFAULT 0)
            PARTITION BY HASH (group_id)
            """,
            """
            CREATE TABLE kvsync_changes (
                seq bigint NOT NULL DEFAULT nextval('kvsync_changes_seq_seq'),
                group_id text NOT NULL,
                device text NOT NULL,
                token bigint NOT NULL,
                kind text NOT NULL,
                name text NOT NULL,
                key bytea NOT NULL,
                value bytea,
                hlc bigint NOT NULL,
                base bigint NOT NULL,
                created_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (group_id, seq),
                UNIQUE (group_id, device, token))
            PARTITION BY HASH (group_id)
            """,
            """
            CREATE TABLE kvsync_state (
                group_id text NOT NULL,
                kind text NOT NULL,
                name text NOT NULL,
                key bytea NOT NULL,
                value bytea,
                version bigint NOT NULL,
                hlc bigint NOT NULL,
                device text NOT NULL,
                token bigint NOT NULL,
                updated_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (group_id, kind, name, key))
            PARTITION BY HASH (group_id)
            """,
            """
            DO $$ BEGIN
                FOR i IN 0..\(partitions - 1) LOOP
                    EXECUTE format('CREATE TABLE kvsync_groups_p%s PARTITION OF kvsync_groups FOR VALUES WITH (MODULUS \(partitions), REMAINDER %s)', i, i);
                    EXECUTE format('CREATE TABLE kvsync_changes_p%s PARTITION OF kvsync_changes FOR VALUES WITH (MODULUS \(partitions), REMAINDER %s)', i, i);
                    EXECUTE format('CREATE TABLE kvsync_state_p%s PARTITION OF kvsync_state FOR VALUES WITH (MODULUS \(partitions), REMAINDER %s)', i, i);
                END LOOP;
            END $$
            """,
            "INSERT INTO kvsync_groups (group_id, last_seq, pruned_through) SELECT group_id, last_seq, pruned_through FROM kvsync_groups_v4",
            """
            INSERT INTO kvsync_changes (seq, group_id, device, token, kind, name, key, value, hlc, base, created_at)
            SELECT seq, group_id, device, token, kind, name, key, value, hlc, base, created_at FROM kvsync_changes_v4
            """,
            """
            INSERT INTO kvsync_state (group_id, kind, name, key, value, version, hlc, device, token, updated_at)
            SELECT group_id, kind, name, key, value, version, hlc, device, token, updated_at FROM kvsync_state_v4
            """,
            // The log's sequence goes on from where it was (it must outlive the old table).
            "ALTER SEQUENCE kvsync_changes_seq_seq OWNED BY kvsync_changes.seq",
            "DROP TABLE kvsync_groups_v4, kvsync_changes_v4, kvsync_state_v4",
            "ALTER TABLE kvsync_groups ENABLE ROW LEVEL SECURITY",
            "ALTER TABLE kvsync_changes ENABLE ROW LEVEL SECURITY",
            "ALTER TABLE kvsync_state ENABLE ROW LEVEL SECURITY",
            groupScopePolicy(on: "kvsync_groups"),
            groupScopePolicy(on: "kvsync_changes"),
            groupScopePolicy(on: "kvsync_state"),
        ],
        [
            // Version 6: what a device says is believed less. The server keeps its own clock bound
            // (a push's bound is the lower of the caller's and this), which only the owner changes
            // (`kvtool sync setup --max-clock-skew`); a credential's revocation, change or deletion is
            // logged with a sequence number, so that a gateway follows them with a cursor that
            // survives an outage of its database; `kvsync_push` revision 3 (``pushFunction``).
            "ALTER TABLE kvsync_schema ADD COLUMN max_clock_skew_ms bigint NOT NULL DEFAULT 60000 CHECK (max_clock_skew_ms >= 0)",
            """
            CREATE TABLE kvsync_revocations (
                seq bigserial PRIMARY KEY,
                credential bigint NOT NULL,
                at timestamptz NOT NULL DEFAULT now())
            """,
            "CREATE INDEX kvsync_revocations_at ON kvsync_revocations (at)",
            "ALTER TABLE kvsync_revocations ENABLE ROW LEVEL SECURITY",
            """
            CREATE FUNCTION kvsync_log_revocation() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO kvsync_revocations (credential) VALUES (OLD.id);
                RETURN NULL;
            END
            $$
            """,
            // Revoked, deleted, or changed in what it grants (its group, device, read-only flag,
            // hash or expiry): a gateway closes its streams, and the device authenticates anew.
            """
            CREATE TRIGGER kvsync_tokens_revoked AFTER UPDATE ON kvsync_tokens FOR EACH ROW
            WHEN ((OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL)
                  OR (OLD.group_id, OLD.device, OLD.read_only, OLD.hash, OLD.expires_at)
                     IS DISTINCT FROM (NEW.group_id, NEW.device, NEW.read_only, NEW.hash, NEW.expires_at))
            EXECUTE FUNCTION kvsync_log_revocation()
            """,
            "CREATE TRIGGER kvsync_tokens_deleted AFTER DELETE ON kvsync_tokens FOR EACH ROW EXECUTE FUNCTION kvsync_log_revocation()",
            // The one way a gateway reads the log (it has no privilege on the table): the entries
            // after its cursor, and those of the last `p_window` seconds (a revocation that took its
            // number before one the gateway already saw, and committed after it).
            """
            CREATE FUNCTION kvsync_revocations_after(p_seq bigint, p_window double precision)
            RETURNS TABLE (seq bigint, credential bigint)
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
                SELECT r.seq, r.credential FROM kvsync_revocations r
                WHERE r.seq > p_seq OR r.at > now() - make_interval(secs => p_window)
                ORDER BY r.seq LIMIT 100000
            $$
            """,
            "REVOKE ALL ON FUNCTION kvsync_revocations_after(bigint, double precision) FROM PUBLIC",
            // Where a gateway that starts begins following the log.
            """
            CREATE FUNCTION kvsync_revocation_cursor() RETURNS bigint
            LANGUAGE sql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
                SELECT coalesce(max(r.seq), 0) FROM kvsync_revocations r
            $$
            """,
            "REVOKE ALL ON FUNCTION kvsync_revocation_cursor() FROM PUBLIC",
            pushFunction(scopeChecks: scopeChecks),
            grants,
        ],
        // Version 7: the bytes of the group's files (issue 49; ServerSchema+Blobs.swift), and
        // `kvsync_push` revision 5, which answers `missing_blob` for a manifest row without them.
        blobMigration,
        // Version 8: the backend's access to synced data (issue 50; ServerSchema+Backend.swift).
        backendMigration,
        // Version 9: scale out (issue 51; ServerSchema+Scale.swift).
        scaleMigration,
    ]

    /// The policy that keeps a role that does not own `table` to the rows of the group its transaction
    /// is scoped to (`kvsync.group`).
    static func groupScopePolicy(on table: String) -> String {
        """
        CREATE POLICY kvsync_group_scope ON \(table)
            USING (group_id = \(ServerSetting.group.current))
            WITH CHECK (group_id = \(ServerSetting.group.current))
        """
    }

    /// Grants the gateway's role what its scoped transactions need, if the role exists: rows of the
    /// three sync tables through the policies (never DELETE: pruning is the owner's), the schema's
    /// version and id, the log's sequence, and the token check.
    static let grants = """
        DO $$ BEGIN
            IF EXISTS (SELECT FROM pg_roles WHERE rolname = '\(gatewayRole)') THEN
                GRANT SELECT, INSERT, UPDATE ON kvsync_groups, kvsync_changes, kvsync_state TO \(gatewayRole);
                GRANT SELECT ON kvsync_schema TO \(gatewayRole);
                GRANT USAGE ON SEQUENCE kvsync_changes_seq_seq TO \(gatewayRole);
                GRANT EXECUTE ON FUNCTION kvsync_authenticate(bytea) TO \(gatewayRole);
                GRANT EXECUTE ON FUNCTION kvsync_revoked_recently(double precision) TO \(gatewayRole);
                IF to_regprocedure('kvsync_revocations_after(bigint, double precision)') IS NOT NULL THEN
                    GRANT EXECUTE ON FUNCTION kvsync_revocations_after(bigint, double precision) TO \(gatewayRole);
                    GRANT EXECUTE ON FUNCTION kvsync_revocation_cursor() TO \(gatewayRole);
                END IF;
                -- (Version 7.) DELETE: an upload whose bytes do not hash to its name is dropped.
                IF to_regclass('kvsync_blobs') IS NOT NULL THEN
                    GRANT SELECT, INSERT, UPDATE, DELETE ON kvsync_blobs TO \(gatewayRole);
                    GRANT SELECT, INSERT, DELETE ON kvsync_blob_chunks TO \(gatewayRole);
                    GRANT EXECUTE ON FUNCTION kvsync_blob_referenced(text, bytea) TO \(gatewayRole);
                END IF;
                -- (Version 8.) A push of a collection with validators calls them through this.
                IF to_regprocedure('\(validateSignature)') IS NOT NULL THEN
                    GRANT EXECUTE ON FUNCTION \(validateSignature) TO \(gatewayRole);
                END IF;
                -- (Version 9.) The directory from group to database, which gateways read.
                IF to_regclass('kvsync_group_home') IS NOT NULL THEN
                    GRANT SELECT ON kvsync_group_home TO \(gatewayRole);
                END IF;
                -- (Version 9.) The poll of the groups with live streams.
                IF to_regprocedure('\(groupEndsSignature)') IS NOT NULL THEN
                    GRANT EXECUTE ON FUNCTION \(groupEndsSignature) TO \(gatewayRole);
                END IF;
            END IF;
        END $$
        """

    /// Whether the gateway's role exists and lacks a privilege ``grants`` gives: a `GRANT` rewrites the
    /// catalog even when it changes nothing, and every session's cached plans of the tables are then
    /// made again (a gateway's next pushes pay for it), so the owner's commands grant only when needed.
    static let grantsNeeded = """
        SELECT EXISTS (SELECT FROM pg_roles WHERE rolname = '\(gatewayRole)') AND NOT (
            has_table_privilege('\(gatewayRole)', 'kvsync_groups', 'SELECT') AND has_table_privilege('\(gatewayRole)', 'kvsync_groups', 'INSERT')
            AND has_table_privilege('\(gatewayRole)', 'kvsync_groups', 'UPDATE')
            AND has_table_privilege('\(gatewayRole)', 'kvsync_changes', 'SELECT') AND has_table_privilege('\(gatewayRole)', 'kvsync_changes', 'INSERT')
            AND has_table_privilege('\(gatewayRole)', 'kvsync_changes', 'UPDATE')
            AND has_table_privilege('\(gatewayRole)', 'kvsync_state', 'SELECT') AND has_table_privilege('\(gatewayRole)', 'kvsync_state', 'INSERT')
            AND has_table_privilege('\(gatewayRole)', 'kvsync_state', 'UPDATE')
            AND has_table_privilege('\(gatewayRole)', 'kvsync_schema', 'SELECT')
            AND has_sequence_privilege('\(gatewayRole)', 'kvsync_changes_seq_seq', 'USAGE')
            AND has_function_privilege('\(gatewayRole)', 'kvsync_authenticate(bytea)', 'EXECUTE')
            AND has_function_privilege('\(gatewayRole)', 'kvsync_revoked_recently(double precision)', 'EXECUTE')
            AND (to_regprocedure('kvsync_revocations_after(bigint, double precision)') IS NULL
                 OR (has_function_privilege('\(gatewayRole)', 'kvsync_revocations_after(bigint, double precision)', 'EXECUTE')
                     AND has_function_privilege('\(gatewayRole)', 'kvsync_revocation_cursor()', 'EXECUTE')))
            AND (to_regclass('kvsync_blobs') IS NULL
                 OR (has_table_privilege('\(gatewayRole)', 'kvsync_blobs', 'SELECT') AND has_table_privilege('\(gatewayRole)', 'kvsync_blobs', 'INSERT')
                     AND has_table_privilege('\(gatewayRole)', 'kvsync_blobs', 'UPDATE') AND has_table_privilege('\(gatewayRole)', 'kvsync_blobs', 'DELETE')
                     AND has_table_privilege('\(gatewayRole)', 'kvsync_blob_chunks', 'SELECT')
                     AND has_table_privilege('\(gatewayRole)', 'kvsync_blob_chunks', 'INSERT')
                     AND has_table_privilege('\(gatewayRole)', 'kvsync_blob_chunks', 'DELETE')
                     AND has_function_privilege('\(gatewayRole)', 'kvsync_blob_referenced(text, bytea)', 'EXECUTE')))
            AND (to_regprocedure('\(validateSignature)') IS NULL
                 OR has_function_privilege('\(gatewayRole)', '\(validateSignature)', 'EXECUTE'))
            AND (to_regclass('kvsync_group_home') IS NULL
                 OR has_table_privilege('\(gatewayRole)', 'kvsync_group_home', 'SELECT'))
            AND (to_regprocedure('\(groupEndsSignature)') IS NULL
                 OR has_function_privilege('\(gatewayRole)', '\(groupEndsSignature)', 'EXECUTE')))
        """

    /// `kvsync_push` from version 3 on, with `scopeChecks` run first. Revision 3 (schema version 6):
    /// the clock bound is the lower of the caller's and the server's own (`kvsync_schema.max_clock_skew_ms`,
    /// which only the owner changes), a stamp of 2^63 or more is refused whatever the bound, a scoped
    /// transaction pushes as its credential's device only, and a (device, token) sent before with
    /// another kind, name, key or value refuses the batch (``deviceInUseState``) instead of being
    /// answered `duplicate`. Revision 4 (the same schema version): a row of the group numbered past the
    /// sequence neither refuses a push nor moves the log's end past numbers still to be drawn
    /// (``pushLoopNumbered``, ``adoptRows``). Revision 5 (schema version 7): a manifest change whose
    /// value names no complete blob of the group is answered `missing_blob` (no version), not applied,
    /// and the rest of the batch is applied as before (``blobsCheck``; both bodies read its answer).
    /// Revision 6 (schema version 8, issue 50): a change of a collection with validators that would
    /// apply is first given to ``validateFunction``; a refusal is answered `rejected: <reason>` with the
    /// server's current row (or NULLs when it has none), not applied, and the rest of the batch goes
    /// on. A batch with no such change runs revision 5's statements (one probe of the registry more).
    ///
    /// Revision 7 (schema version 9, issue 51): the push no longer notifies inside its transaction
    /// (``adoptRows(notifying:)``); whoever pushed sends the wake-up after the commit (``WakeUps``).
    /// `wakeInside` makes this revision's body with the notification inside the transaction, as up to
    /// revision 6, for `kvtool bench pushers` to compare: marked ``notifyingInsideMark``, never this
    /// revision's mark (a server left with it is replaced by the next device that migrates).
    ///
    /// Revision 8 (the same schema version): the check for rows numbered past the sequence reads the
    /// sequence once (`(SELECT …)`, an init plan), not per row: `pg_sequence_last_value` is volatile,
    /// so as a bound of the scan it could not be the index's, and every push read its group's whole
    /// log (33 ms a push for a group of 200,000 changes; found profiling item 5 of issue 51).
    static func pushFunction(scopeChecks: String, wakeInside: Bool = false) -> String {
        // Where the log may end: the group's last sequence number, or the sequence's, if further.
        let sequenceEnd = "greatest(previous, coalesce(pg_sequence_last_value('kvsync_changes_seq_seq'), 0))"
        return """
            CREATE OR REPLACE FUNCTION \(pushDeclaration)
            RETURNS TABLE (idx integer, outcome text, version bigint, s_value bytea, s_hlc bigint, s_device text)
            -- Plans made once per connection: a custom plan per call costs more than the batch's rows.
            SET plan_cache_mode = force_generic_plan
            LANGUAGE plpgsql AS $kvsync_push$
            DECLARE
                n integer := coalesce(array_length(p_tokens, 1), 0);
                cur kvsync_state%ROWTYPE;
                found_seq bigint;
                new_seq bigint;
                last bigint := NULL;
                previous bigint;
                sent_low bigint;
                sent_high bigint;
                v bytea;
                server_ms bigint := floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint;
                ahead_ms bigint;
                bound bigint;
                reused integer;
                distinct_tokens boolean;
                first_low bigint;
                first_high bigint;
                ahead boolean;
                horizon bigint;
                missing_blobs integer[];
                validated boolean;
                reason text;
            BEGIN
                -- \(wakeInside ? notifyingInsideMark : pushRevision)
            \(scopeChecks)
                -- A stamp further ahead of this server's clock than the bound refuses the whole
                -- batch: one device's fast clock must not win every conflict, nor move the others'.
                -- The bound is the caller's, within the server's own (least() skips a NULL). A stamp
                -- with its top bit set (2^63 and on) travels as a negative bigint: always refused.
                SELECT least(p_max_skew_ms, (SELECT max(s.max_clock_skew_ms) FROM kvsync_schema s)) INTO bound;
                SELECT max(CASE WHEN h < 0 THEN 9223372036854775807 ELSE (h >> 16) - server_ms END) INTO ahead_ms
                    FROM unnest(p_hlcs) AS h;
                IF ahead_ms IS NOT NULL AND (ahead_ms > bound OR ahead_ms = 9223372036854775807) THEN
                    idx := 0; outcome := 'clock_ahead'; version := ahead_ms; s_value := NULL; s_hlc := server_ms << 16;
                    s_device := NULL;
                    RETURN NEXT;
                    RETURN;
                END IF;
                INSERT INTO kvsync_groups (group_id) VALUES (p_group) ON CONFLICT DO NOTHING;
                SELECT g.last_seq, g.pruned_through INTO previous, horizon FROM kvsync_groups g WHERE g.group_id = p_group FOR UPDATE;
                -- A pruning horizon past the log's end (no prune makes one; devices read it as the end)
                -- is brought back to it: left, it would move with the end and resync every device
                -- after every push (revision 4).
                IF horizon > previous THEN
                    UPDATE kvsync_groups SET pruned_through = previous WHERE group_id = p_group;
                END IF;
                -- Rows of the group numbered past the sequence (planted, or restored without it): the
                -- set-based statement could draw one of their numbers, so the loop, which steps over
                -- them, takes such a batch (revision 4).
                ahead := EXISTS (SELECT FROM kvsync_changes c WHERE c.group_id = p_group
                                 AND c.seq > (SELECT \(sequenceEnd)));
                -- A token greater than every token this device sent in its range (a replicator's history
                -- tokens are below 2^62, its other changes' from 2^62 on) was never sent: two index probes
                -- spare one per change.
                SELECT max(c.token) INTO sent_low FROM kvsync_changes c
                    WHERE c.group_id = p_group AND c.device = p_device AND c.token < 4611686018427387904;
                SELECT max(c.token) INTO sent_high FROM kvsync_changes c
                    WHERE c.group_id = p_group AND c.device = p_device AND c.token >= 4611686018427387904;
                -- A token this device sent before comes again with the same change (a batch sent twice),
                -- or another container sends under this device id: refused, never answered 'duplicate'
                -- (which would tell that container its write reached the server when it did not). A batch
                -- whose tokens are all past what this device sent in their range (a fresh push) skips it.
                SELECT min(t) FILTER (WHERE t < 4611686018427387904), min(t) FILTER (WHERE t >= 4611686018427387904)
                    INTO first_low, first_high FROM unnest(p_tokens) AS t;
                IF first_low <= sent_low OR first_high <= sent_high THEN
                SELECT u.i INTO reused
                FROM unnest(p_tokens, p_kinds, p_names, p_keys, p_values, p_deleted)
                     WITH ORDINALITY AS u(tok, kind, name, key, val, del, i)
                CROSS JOIN LATERAL (SELECT c.kind, c.name, c.key, c.value FROM kvsync_changes c
                                    WHERE CASE WHEN u.tok < 4611686018427387904 THEN u.tok <= sent_low
                                               ELSE u.tok <= sent_high END
                                      AND c.group_id = p_group AND c.device = p_device AND c.token = u.tok LIMIT 1) d
                WHERE d.kind <> u.kind OR d.name <> u.name OR d.key <> u.key
                   OR d.value IS DISTINCT FROM CASE WHEN u.del THEN NULL ELSE u.val END
                LIMIT 1;
                END IF;
                distinct_tokens := (SELECT count(DISTINCT t) FROM unnest(p_tokens) AS t) = n;
                -- The same within the batch: a token twice with two different changes.
                IF reused IS NULL AND NOT distinct_tokens THEN
                    SELECT b.i INTO reused
                    FROM unnest(p_tokens, p_kinds, p_names, p_keys, p_values, p_deleted)
                         WITH ORDINALITY AS a(tok, kind, name, key, val, del, i)
                    JOIN unnest(p_tokens, p_kinds, p_names, p_keys, p_values, p_deleted)
                         WITH ORDINALITY AS b(tok, kind, name, key, val, del, i) ON a.tok = b.tok AND a.i < b.i
                    WHERE a.kind <> b.kind OR a.name <> b.name OR a.key <> b.key
                       OR (CASE WHEN a.del THEN NULL ELSE a.val END) IS DISTINCT FROM (CASE WHEN b.del THEN NULL ELSE b.val END)
                    LIMIT 1;
                END IF;
                IF reused IS NOT NULL THEN
                    RAISE EXCEPTION 'kvsync_push: device % sent token % before with another key or value: this device id is in use by another container',
                        p_device, p_tokens[reused] USING ERRCODE = '\(deviceInUseState)';
                END IF;
                -- Manifest changes whose file the server has not got whole (revision 5).
                \(blobsCheck)
                -- Whether a change of the batch is one of a collection with validators (revision 6).
                \(batchValidated)
                -- A batch that repeats a key or a token (no replicator sends one) takes the loop:
                -- one statement cannot write a row twice.
                IF distinct_tokens AND NOT ahead
                   AND (SELECT count(*) FROM (SELECT DISTINCT kind, name, key
                        FROM unnest(p_kinds, p_names, p_keys) AS u(kind, name, key)) AS keys) = n THEN
                    \(pushSet + adoptRows(notifying: wakeInside))
                END IF;
                \(pushLoopNumbered + adoptRows(notifying: wakeInside))
            END
            $kvsync_push$
            """
    }

    /// Whether the server's `kvsync_push` is this library's revision (``pushRevision``).
    static func pushIsCurrent(_ connection: PostgresConnection, logger: Logger) async throws -> Bool {
        var current = false
        let query = PostgresQuery(unsafeSQL: """
            SELECT position('\(pushRevision)' IN prosrc) > 0 FROM pg_proc
            WHERE oid = to_regprocedure('\(pushSignature)')
            """)
        for try await (marked) in try await connection.query(query, logger: logger).decode(Bool.self) { current = marked }
        return current
    }

    /// Replaces an older revision of `kvsync_push` with this one; a user that does not own the function
    /// leaves it (the older one answers the same, more slowly) with a notice.
    static let replacePush = """
        DO $$ BEGIN
            EXECUTE $replace$ \(pushFunction(scopeChecks: scopeChecks)) $replace$;
        EXCEPTION WHEN insufficient_privilege THEN
            RAISE NOTICE 'kvsync: cannot replace kvsync_push with %; the older revision stays', '\(pushRevision)';
        END $$
        """

    /// Creates the tables, or brings them up to ``version``, under an advisory lock so that devices
    /// starting together do not race.
    static func migrate(_ connection: PostgresConnection, logger: Logger) async throws {
        _ = try await connection.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(migrationLock))", logger: logger)
            try await connection.query("CREATE TABLE IF NOT EXISTS kvsync_schema (version integer NOT NULL)", logger: logger)
            var current: Int?
            for try await (found) in try await connection.query("SELECT version FROM kvsync_schema", logger: logger)
                .decode(Int.self) {
                current = max(current ?? 0, found)
            }
            if current == nil {
                try await connection.query("INSERT INTO kvsync_schema (version) VALUES (0)", logger: logger)
            }
            let found = current ?? 0
            guard found <= version else { throw ReplicationError.serverSchemaTooNew(found: found, supported: version) }
            for step in found..<version {
                for statement in migrations[step] {
                    try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
                }
            }
            if found < version {
                try await connection.query("UPDATE kvsync_schema SET version = \(version)", logger: logger)
            } else if try await !pushIsCurrent(connection, logger: logger) {
                try await connection.query(PostgresQuery(unsafeSQL: replacePush), logger: logger)
            }
        }
    }
}
#endif
