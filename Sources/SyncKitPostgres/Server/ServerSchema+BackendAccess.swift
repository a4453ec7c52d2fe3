#if PostgreSQL
/// Schema version 8's backend access (issue 50): the role `kvsync_backend`, the groups each of its
/// logins may read and write, the JSON view of the state, opt-in stored JSON columns, and
/// server-authored writes that devices receive like any other change.
///
/// Who may do what (RELIABILITY.md has the table): the owner everything; `kvsync_gateway` rows of the
/// group its transaction is scoped to (`kvsync.group`), and no backend function; `kvsync_backend` rows
/// of the groups granted to its login in `kvsync_backend_grants` (read through `kvsync_state_json`),
/// and writes to those groups through ``backendWriteFunction`` only. The gateway's policy trusted a
/// setting any session may set; it applied to every role (`PUBLIC`), so a backend login could have set
/// `kvsync.group` and read any group: from this version it applies to `kvsync_gateway` only.
extension ServerSchema {
    /// The role an app's backend logs in under (a member of it): it owns nothing and bypasses no
    /// row-level security.
    static let backendRole = "kvsync_backend"

    /// Part of schema version 8 (backendMigration).
    static var backendAccessMigration: [String] {
        [
            """
            DO $$ BEGIN
                IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '\(backendRole)') THEN
                    BEGIN
                        CREATE ROLE \(backendRole) NOLOGIN;
                    EXCEPTION WHEN insufficient_privilege THEN
                        RAISE NOTICE 'kvsync: cannot create role \(backendRole); an app backend needs it';
                    END;
                END IF;
            END $$
            """,
            // The groups each backend login may read and write, written by the owner only
            // (`kvtool sync backend grant|revoke`). A login reads its own rows (the state's policy
            // asks this table as the login).
            """
            CREATE TABLE kvsync_backend_grants (
                login text NOT NULL,
                group_id text NOT NULL,
                granted_at timestamptz NOT NULL DEFAULT now(),
                PRIMARY KEY (login, group_id))
            """,
            "ALTER TABLE kvsync_backend_grants ENABLE ROW LEVEL SECURITY",
            "CREATE POLICY kvsync_backend_own ON kvsync_backend_grants FOR SELECT USING (login = session_user)",
            // A key as text when it is UTF-8 without a NUL (what a collection's String key is), else NULL.
            """
            CREATE FUNCTION kvsync_key_text(p_key bytea) RETURNS text
            LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
            BEGIN
                RETURN convert_from(p_key, 'UTF8');
            EXCEPTION WHEN others THEN
                RETURN NULL;
            END
            $$
            """,
            // Opt-in stored JSON: collections listed here keep `value_json` on every write of their
            // rows (a trigger that exists only while the list is not empty, so that a push of a
            // server without one pays nothing).
            """
            CREATE TABLE kvsync_json_collections (
                kind text NOT NULL,
                name text NOT NULL,
                PRIMARY KEY (kind, name))
            """,
            "GRANT SELECT ON kvsync_json_collections TO PUBLIC",
            "ALTER TABLE kvsync_state ADD COLUMN value_json jsonb",
            """
            CREATE FUNCTION kvsync_state_keep_json() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                NEW.value_json := CASE WHEN EXISTS (SELECT FROM kvsync_json_collections j WHERE j.kind = NEW.kind AND j.name = NEW.name)
                                       THEN kvsync_cbor_to_jsonb(NEW.value) END;
                RETURN NEW;
            END
            $$
            """,
            """
            CREATE FUNCTION kvsync_json_collections_changed() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF EXISTS (SELECT FROM kvsync_json_collections) THEN
                    IF NOT EXISTS (SELECT FROM pg_trigger WHERE tgname = 'kvsync_state_json' AND tgrelid = 'kvsync_state'::regclass) THEN
                        CREATE TRIGGER kvsync_state_json BEFORE INSERT OR UPDATE ON kvsync_state
                            FOR EACH ROW EXECUTE FUNCTION kvsync_state_keep_json();
                    END IF;
                    -- Rows written before their collection was listed, or after it was unlisted.
                    UPDATE kvsync_state s SET value_json = kvsync_cbor_to_jsonb(s.value)
                        FROM kvsync_json_collections j
                        WHERE s.kind = j.kind AND s.name = j.name AND s.value IS NOT NULL AND s.value_json IS NULL;
                    UPDATE kvsync_state s SET value_json = NULL
                        WHERE s.value_json IS NOT NULL
                          AND NOT EXISTS (SELECT FROM kvsync_json_collections j WHERE j.kind = s.kind AND j.name = s.name);
                ELSE
                    DROP TRIGGER IF EXISTS kvsync_state_json ON kvsync_state;
                    UPDATE kvsync_state s SET value_json = NULL WHERE s.value_json IS NOT NULL;
                END IF;
                RETURN NULL;
            END
            $$
            """,
            """
            CREATE TRIGGER kvsync_json_collections_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON kvsync_json_collections
                FOR EACH STATEMENT EXECUTE FUNCTION kvsync_json_collections_changed()
            """,
            // The state with the key as text and the value as JSON. `security_invoker`: whoever reads
            // it meets the state's row-level security as themselves (a backend login sees its granted
            // groups only). A tombstone's value_json is NULL.
            """
            CREATE VIEW kvsync_state_json WITH (security_invoker = true) AS
                SELECT s.group_id, s.kind, s.name, s.key, kvsync_key_text(s.key) AS key_text,
                       coalesce(s.value_json, kvsync_cbor_to_jsonb(s.value)) AS value_json, s.hlc, s.device, s.version
                FROM kvsync_state s
            """,
            backendWriteFunction,
            "REVOKE ALL ON FUNCTION \(backendWriteSignature) FROM PUBLIC",
            """
            CREATE FUNCTION kvsync_server_put(p_group text, p_kind text, p_name text, p_key bytea, p_value bytea,
                                              p_author text, p_expected_version bigint DEFAULT NULL)
            RETURNS TABLE (outcome text, version bigint, s_value bytea, s_hlc bigint, s_device text, reason text)
            LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
                SELECT * FROM kvsync_server_write(p_group, p_kind, p_name, p_key, p_value, p_author, p_expected_version, 'kvsync_server_put')
            $$
            """,
            """
            CREATE FUNCTION kvsync_server_put_json(p_group text, p_kind text, p_name text, p_key bytea, p_value jsonb,
                                                   p_author text, p_expected_version bigint DEFAULT NULL)
            RETURNS TABLE (outcome text, version bigint, s_value bytea, s_hlc bigint, s_device text, reason text)
            LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
                SELECT * FROM kvsync_server_write(p_group, p_kind, p_name, p_key,
                                                  CASE WHEN p_value IS NULL THEN NULL ELSE kvsync_jsonb_to_cbor(p_value) END,
                                                  p_author, p_expected_version, 'kvsync_server_put_json')
            $$
            """,
            """
            CREATE FUNCTION kvsync_server_delete(p_group text, p_kind text, p_name text, p_key bytea,
                                                 p_author text, p_expected_version bigint DEFAULT NULL)
            RETURNS TABLE (outcome text, version bigint, s_value bytea, s_hlc bigint, s_device text, reason text)
            LANGUAGE sql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
                SELECT * FROM kvsync_server_write(p_group, p_kind, p_name, p_key, NULL, p_author, p_expected_version, 'kvsync_server_delete')
            $$
            """,
            "REVOKE ALL ON FUNCTION kvsync_server_put(text, text, text, bytea, bytea, text, bigint) FROM PUBLIC",
            "REVOKE ALL ON FUNCTION kvsync_server_put_json(text, text, text, bytea, jsonb, text, bigint) FROM PUBLIC",
            "REVOKE ALL ON FUNCTION kvsync_server_delete(text, text, text, bytea, text, bigint) FROM PUBLIC",
            backendGrants,
        ]
    }

    /// `kvsync_server_write(...)`'s types, as PostgreSQL names the function.
    static let backendWriteSignature = "kvsync_server_write(text, text, text, bytea, bytea, text, bigint, text)"

    /// The one body of the three server writes (`p_value` NULL: a delete), called by them only (its
    /// EXECUTE is the owner's): the caller is allowed the group (the owner, or a login granted it),
    /// the group's lock is taken as `kvsync_push` takes it, the collection's validators run (part of
    /// the same schema version, looked up by name so that this body does not depend on their
    /// revision), and the change is written to the log and the state as device `server:<author>` with
    /// that device's next token and a clock never behind the group's newest; the log's end then moves
    /// and live devices are told, by ``adoptRows`` (the push's end, notifying inside the transaction: its
    /// SQL callers send no wake-up after the commit, as pushers do from `kvsync_push` revision 7).
    static let backendWriteFunction = """
        CREATE FUNCTION kvsync_server_write(p_group text, p_kind text, p_name text, p_key bytea, p_value bytea,
                                            p_author text, p_expected_version bigint, p_caller text)
        RETURNS TABLE (outcome text, version bigint, s_value bytea, s_hlc bigint, s_device text, reason text)
        LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $kvsync_server_write$
        DECLARE
            dev text := 'server:' || p_author;
            cur kvsync_state%ROWTYPE;
            previous bigint;
            horizon bigint;
            last bigint;
            new_seq bigint;
            stamp bigint;
            tok bigint;
            refusal text;
            validate regprocedure := to_regprocedure('kvsync_validate(text, text, text, bytea, jsonb, jsonb, text)');
        BEGIN
            IF p_group IS NULL OR p_kind IS NULL OR p_name IS NULL OR p_key IS NULL OR p_author IS NULL THEN
                RAISE EXCEPTION '%: the group, kind, name, key and author are required', p_caller USING ERRCODE = '22004';
            END IF;
            IF p_author !~ '^[A-Za-z0-9._@-]{1,64}$' THEN
                RAISE EXCEPTION '%: an author is 1 to 64 letters, digits, dots, underscores, hyphens or @', p_caller USING ERRCODE = '22023';
            END IF;
            IF p_kind NOT IN ('collection', 'defaults') THEN
                RAISE EXCEPTION '%: the kind is collection or defaults, not %', p_caller, p_kind USING ERRCODE = '22023';
            END IF;
            IF p_group = '' OR p_name = '' OR p_group ~ '[[:cntrl:]]' OR p_name ~ '[[:cntrl:]]' THEN
                RAISE EXCEPTION '%: a group or collection name is not empty and holds no control character', p_caller USING ERRCODE = '22023';
            END IF;
            IF p_kind = 'collection' AND p_name = '_files' THEN
                RAISE EXCEPTION '%: the files manifest (_files) is written by devices with their files, never by the server', p_caller USING ERRCODE = '22023';
            END IF;
            IF NOT (pg_has_role(session_user, (SELECT c.relowner FROM pg_class c WHERE c.oid = 'kvsync_state'::regclass), 'MEMBER')
                    OR EXISTS (SELECT FROM kvsync_backend_grants g WHERE g.login = session_user AND g.group_id = p_group)) THEN
                RAISE EXCEPTION '%: the login % is not granted the group % (kvtool sync backend grant)', p_caller, session_user, p_group
                    USING ERRCODE = '42501';
            END IF;
            -- The group's lock, as kvsync_push takes it: sequence numbers become visible in order.
            INSERT INTO kvsync_groups (group_id) VALUES (p_group) ON CONFLICT DO NOTHING;
            SELECT g.last_seq, g.pruned_through INTO previous, horizon FROM kvsync_groups g WHERE g.group_id = p_group FOR UPDATE;
            IF horizon > previous THEN
                UPDATE kvsync_groups SET pruned_through = previous WHERE group_id = p_group;
            END IF;
            SELECT * INTO cur FROM kvsync_state s
                WHERE s.group_id = p_group AND s.kind = p_kind AND s.name = p_name AND s.key = p_key;
            IF p_expected_version IS NOT NULL AND coalesce(cur.version, 0) <> p_expected_version THEN
                outcome := 'conflict'; version := cur.version; s_value := cur.value; s_hlc := cur.hlc; s_device := cur.device;
                reason := NULL;
                RETURN NEXT;
                RETURN;
            END IF;
            IF validate IS NOT NULL THEN
                EXECUTE 'SELECT kvsync_validate($1, $2, $3, $4, $5, $6, $7)' INTO refusal
                    USING p_group, p_kind, p_name, p_key, kvsync_cbor_to_jsonb(p_value), kvsync_cbor_to_jsonb(cur.value), dev;
                IF refusal IS NOT NULL THEN
                    outcome := 'rejected'; version := cur.version; s_value := cur.value; s_hlc := cur.hlc; s_device := cur.device;
                    reason := refusal;
                    RETURN NEXT;
                    RETURN;
                END IF;
            END IF;
            -- Never behind the group's newest clock (nor its token behind any of its own, also after
            -- a prune): one pass over the group's state.
            SELECT greatest(floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint << 16, max(s.hlc) + 1),
                   greatest((SELECT max(c.token) FROM kvsync_changes c WHERE c.group_id = p_group AND c.device = dev),
                            max(s.token) FILTER (WHERE s.device = dev))
                INTO stamp, tok FROM kvsync_state s WHERE s.group_id = p_group;
            tok := coalesce(tok, 0) + 1;
            -- A number another row of the group holds is stepped over, as the push does.
            LOOP
                new_seq := nextval('kvsync_changes_seq_seq');
                EXIT WHEN NOT EXISTS (SELECT FROM kvsync_changes c WHERE c.group_id = p_group AND c.seq = new_seq);
            END LOOP;
            INSERT INTO kvsync_changes (seq, group_id, device, token, kind, name, key, value, hlc, base)
                VALUES (new_seq, p_group, dev, tok, p_kind, p_name, p_key, p_value, stamp, coalesce(cur.version, 0));
            INSERT INTO kvsync_state AS s (group_id, kind, name, key, value, version, hlc, device, token)
                VALUES (p_group, p_kind, p_name, p_key, p_value, new_seq, stamp, dev, tok)
                ON CONFLICT (group_id, kind, name, key) DO UPDATE SET value = EXCLUDED.value,
                    version = EXCLUDED.version, hlc = EXCLUDED.hlc, device = EXCLUDED.device,
                    token = EXCLUDED.token, updated_at = now();
            outcome := 'applied'; version := new_seq; s_value := NULL; s_hlc := stamp; s_device := dev; reason := NULL;
            RETURN NEXT;
            \(adoptRows)
        END
        $kvsync_server_write$
        """

    /// What the two roles are given, when they exist (run by the migration and by
    /// ``SyncServerSetup``, which may create them after it): the gateway's policies apply to
    /// `kvsync_gateway` only; `kvsync_backend` reads the state of its logins' granted groups (its own
    /// policy) and the JSON view, and calls the server writes. Safe to run again.
    static let backendGrants = """
        DO $$
        DECLARE t text;
        BEGIN
            IF EXISTS (SELECT FROM pg_roles WHERE rolname = '\(gatewayRole)') THEN
                FOREACH t IN ARRAY ARRAY['kvsync_groups', 'kvsync_changes', 'kvsync_state', 'kvsync_blobs', 'kvsync_blob_chunks'] LOOP
                    IF EXISTS (SELECT FROM pg_policy p WHERE p.polname = 'kvsync_group_scope' AND p.polrelid = t::regclass
                               AND p.polroles <> ARRAY[(SELECT oid FROM pg_roles WHERE rolname = '\(gatewayRole)')]) THEN
                        EXECUTE format('ALTER POLICY kvsync_group_scope ON %I TO \(gatewayRole)', t);
                    END IF;
                END LOOP;
            END IF;
            IF EXISTS (SELECT FROM pg_roles WHERE rolname = '\(backendRole)') THEN
                IF NOT EXISTS (SELECT FROM pg_policy p WHERE p.polname = 'kvsync_backend_read' AND p.polrelid = 'kvsync_state'::regclass) THEN
                    CREATE POLICY kvsync_backend_read ON kvsync_state FOR SELECT TO \(backendRole)
                        USING (group_id IN (SELECT g.group_id FROM kvsync_backend_grants g WHERE g.login = session_user));
                END IF;
                IF NOT (has_table_privilege('\(backendRole)', 'kvsync_state', 'SELECT')
                        AND has_table_privilege('\(backendRole)', 'kvsync_state_json', 'SELECT')
                        AND has_table_privilege('\(backendRole)', 'kvsync_backend_grants', 'SELECT')
                        AND has_function_privilege('\(backendRole)', 'kvsync_server_put(text, text, text, bytea, bytea, text, bigint)', 'EXECUTE')
                        AND has_function_privilege('\(backendRole)', 'kvsync_server_put_json(text, text, text, bytea, jsonb, text, bigint)', 'EXECUTE')
                        AND has_function_privilege('\(backendRole)', 'kvsync_server_delete(text, text, text, bytea, text, bigint)', 'EXECUTE')) THEN
                    GRANT SELECT ON kvsync_state, kvsync_state_json, kvsync_backend_grants TO \(backendRole);
                    GRANT EXECUTE ON FUNCTION kvsync_server_put(text, text, text, bytea, bytea, text, bigint) TO \(backendRole);
                    GRANT EXECUTE ON FUNCTION kvsync_server_put_json(text, text, text, bytea, jsonb, text, bigint) TO \(backendRole);
                    GRANT EXECUTE ON FUNCTION kvsync_server_delete(text, text, text, bytea, text, bigint) TO \(backendRole);
                END IF;
            END IF;
        END $$
        """
}
#endif
