#if PostgreSQL
import KVStore
import SyncWire

/// Schema version 7 (issue 49): the bytes of a group's files, content-addressed, on the server.
///
/// - `kvsync_blobs`: one row per (group, SHA-256): the size its upload declared, how many bytes from
///   its start are in (`received`: where an upload goes on), and whether every byte is in and hashed
///   to its name (`complete`: only then is it served or may a manifest row name it).
/// - `kvsync_blob_chunks`: the bytes, one row per chunk of at most ``BlobWire/chunkBytes`` at its
///   offset, stored `EXTERNAL` (uncompressed: images and archives do not compress, and a range read
///   then fetches only the TOAST slices it needs).
///
/// Both are hash-partitioned by group and under row-level security as the sync tables are: a
/// gateway's transaction sees only its group's blobs, so another group's hash answers as an unknown
/// one (no deduplication across groups, no "do you have this hash?" oracle). Not large objects: those
/// live in a catalog with per-object grants, outside row-level security.
///
/// The functions run as their caller (`SECURITY INVOKER`): for a gateway, as ``gatewayRole`` under
/// the policies. Each refuses a `p_group` other than the transaction's scope, as `kvsync_push` does.
extension ServerSchema {
    /// The manifest's rows on the server: kind and name of `kvsync_state` / `kvsync_changes`. The kind
    /// is the catalog's (`collection`), as replicators write it.
    static let manifestKind = "collection"
    static var manifestName: String { BlobWire.manifestCollection }

    /// The bytes of one chunk, at most (``BlobWire/chunkBytes``).
    static var chunkBytes: Int { BlobWire.chunkBytes }

    /// A manifest value over this many bytes has no hash for the server (a manifest entry is about a
    /// hundred): the walk below stays short whatever a row holds.
    static let manifestMaxBytes = 65_536
    /// CBOR items a manifest value may hold, at most, nested included, and how deep they may nest in
    /// its map: as deep as a device's decoder goes (`CBORLimits.default.maxDepth`, 64, the map
    /// included), so that a value the device reads is one the server reads.
    static let manifestMaxItems = 4_096
    static var manifestMaxDepth: Int { CBORLimits.default.maxDepth - 1 }

    /// The condition that a `kvsync_state` row (alias `s`) is a current manifest row of group `group`
    /// naming `hash`: the index ``manifestIndex`` answers it with one probe.
    static func referencedCondition(group: String, hash: String) -> String {
        """
        EXISTS (SELECT FROM kvsync_state s
                        WHERE s.group_id = \(group) AND s.kind = '\(manifestKind)' AND s.name = '\(manifestName)'
                          AND s.value IS NOT NULL AND kvsync_manifest_hash(s.value) = \(hash))
        """
    }

    /// The scope check every blob function runs first: a transaction scoped to a group (a gateway's)
    /// works on that group's blobs only.
    static func blobScopeCheck(_ function: String) -> String {
        """
        IF coalesce(\(ServerSetting.group.current), '') <> '' AND \(ServerSetting.group.current) <> p_group THEN
                RAISE EXCEPTION '\(function): this transaction is scoped to another group' USING ERRCODE = '42501';
            END IF;
            IF p_group IS NULL OR p_sha256 IS NULL OR octet_length(p_sha256) <> 32 THEN
                RAISE EXCEPTION '\(function): a blob hash is 32 bytes (a SHA-256), not %', coalesce(octet_length(p_sha256), 0)
                    USING ERRCODE = '22023';
            END IF;
        """
    }

    /// `kvsync_manifest_hash(value)`: the 32-byte `sha256` entry of a manifest value (a
    /// ``FileManifestEntry``'s CBOR), or NULL for anything else. It never raises: every read is
    /// bounds-checked first, an argument too large for any length here is refused before it is
    /// computed, and the walk is bounded (``manifestMaxBytes``, ``manifestMaxItems``,
    /// ``manifestMaxDepth``).
    ///
    /// The value must be one well-formed CBOR item (RFC 8949 §3, nothing after it): a definite-length
    /// map. Its entries are read in any order; a key that is the text `sha256` must have a byte string
    /// of 32 bytes as its value (else NULL), and only one such key (a map with a key twice is not valid
    /// CBOR: NULL). Every other item is skipped whatever it is: integers, strings (definite or in
    /// chunks), arrays and maps (definite or not), tags, simple values and floats. Not checked (it is
    /// validity, not well-formedness): that text is UTF-8, that tags hold what they should.
    ///
    /// The walk is a loop over heads with a stack of open containers (items left in each, -1 for one
    /// of indefinite length), no recursion. In `make test` it agrees with the Swift encoder on every
    /// generated entry (``BlobServerTests``).
    static let manifestHashFunction = """
        CREATE FUNCTION kvsync_manifest_hash(p_value bytea) RETURNS bytea
        LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $kvsync_manifest_hash$
        DECLARE
            n integer := octet_length(p_value);
            pos integer := 0;
            head integer;
            major integer;
            info integer;
            arg bigint;
            width integer;
            open_left bigint[] := '{}';
            open_chunks integer[] := '{}';
            depth integer := 0;
            items integer := 0;
            entries bigint;
            done boolean;
            -- The first head of the item being skipped: its major type, its argument (-1: indefinite)
            -- and where its content starts.
            first_major integer;
            first_arg bigint;
            first_start integer;
            key_is_hash boolean := false;
            hash bytea := NULL;
        BEGIN
            IF n = 0 OR n > \(manifestMaxBytes) THEN
                RETURN NULL;
            END IF;
            -- The map's head: major type 5, of definite length.
            head := get_byte(p_value, 0);
            pos := 1;
            IF head >> 5 <> 5 OR head & 31 > 27 THEN
                RETURN NULL;
            END IF;
            IF head & 31 < 24 THEN
                entries := head & 31;
            ELSE
                width := 1 << ((head & 31) - 24);
                IF pos + width > n THEN
                    RETURN NULL;
                END IF;
                entries := 0;
                FOR j IN 0..width - 1 LOOP
                    -- More entries than bytes left is no map here, whatever the width says.
                    IF entries > n THEN
                        RETURN NULL;
                    END IF;
                    entries := entries * 256 + get_byte(p_value, pos + j);
                END LOOP;
                pos := pos + width;
            END IF;
            IF entries * 2 > n - pos THEN
                RETURN NULL;
            END IF;
            -- Each entry is two items, a key and its value; each step skips one whole item.
            FOR step IN 1..entries * 2 LOOP
                first_major := NULL;
                LOOP
                    IF pos >= n THEN
                        RETURN NULL;
                    END IF;
                    items := items + 1;
                    IF items > \(manifestMaxItems) THEN
                        RETURN NULL;
                    END IF;
                    head := get_byte(p_value, pos);
                    pos := pos + 1;
                    major := head >> 5;
                    info := head & 31;
                    done := true;
                    IF head = 255 THEN
                        -- A break ends the innermost container, which must be of indefinite length.
                        IF depth = 0 OR open_left[depth] <> -1 THEN
                            RETURN NULL;
                        END IF;
                        depth := depth - 1;
                    ELSE
                        IF info < 24 THEN
                            arg := info;
                        ELSIF info <= 27 THEN
                            width := 1 << (info - 24);
                            IF pos + width > n THEN
                                RETURN NULL;
                            END IF;
                            arg := 0;
                            FOR j IN 0..width - 1 LOOP
                                -- Past 2^32 no length or count fits here: NULL marks it (read no further).
                                IF arg > 16777215 THEN
                                    arg := NULL;
                                    EXIT;
                                END IF;
                                arg := arg * 256 + get_byte(p_value, pos + j);
                            END LOOP;
                            pos := pos + width;
                        ELSIF info = 31 AND major IN (2, 3, 4, 5) THEN
                            arg := -1;
                        ELSE
                            RETURN NULL;
                        END IF;
                        IF first_major IS NULL THEN
                            first_major := major;
                            first_arg := arg;
                            first_start := pos;
                        END IF;
                        -- Inside a string of indefinite length, only definite strings of its type.
                        IF depth > 0 AND open_chunks[depth] <> 0 AND (major <> open_chunks[depth] OR arg = -1) THEN
                            RETURN NULL;
                        END IF;
                        IF major IN (2, 3) THEN
                            IF arg = -1 THEN
                                done := false;
                                IF depth >= \(manifestMaxDepth) THEN
                                    RETURN NULL;
                                END IF;
                                depth := depth + 1;
                                open_left[depth] := -1;
                                open_chunks[depth] := major;
                            ELSIF arg IS NULL OR arg > n - pos THEN
                                RETURN NULL;
                            ELSE
                                pos := pos + arg::integer;
                            END IF;
                        ELSIF major IN (4, 5, 6) THEN
                            -- A tag (its number unread) holds one item; a map two per entry.
                            IF major = 6 THEN
                                arg := 1;
                            ELSIF arg IS NULL THEN
                                RETURN NULL;
                            ELSIF major = 5 AND arg > 0 THEN
                                arg := arg * 2;
                            END IF;
                            -- Every item takes a byte at least.
                            IF arg > n - pos THEN
                                RETURN NULL;
                            END IF;
                            IF arg <> 0 THEN
                                done := false;
                                IF depth >= \(manifestMaxDepth) THEN
                                    RETURN NULL;
                                END IF;
                                depth := depth + 1;
                                open_left[depth] := arg;
                                open_chunks[depth] := 0;
                            END IF;
                        ELSIF major = 7 AND info = 24 AND arg < 32 THEN
                            -- A simple value below 32 in two bytes is not well-formed.
                            RETURN NULL;
                        END IF;
                    END IF;
                    -- An item ended: it counts in its container, which may end with it.
                    IF done THEN
                        LOOP
                            EXIT WHEN depth = 0 OR open_left[depth] = -1;
                            open_left[depth] := open_left[depth] - 1;
                            EXIT WHEN open_left[depth] > 0;
                            depth := depth - 1;
                        END LOOP;
                        EXIT WHEN depth = 0;
                    END IF;
                END LOOP;
                IF step % 2 = 1 THEN
                    key_is_hash := first_major = 3 AND first_arg = 6
                        AND substring(p_value FROM first_start + 1 FOR 6) = '\\x736861323536'::bytea;
                ELSIF key_is_hash THEN
                    IF hash IS NOT NULL OR first_major <> 2 OR first_arg <> 32 THEN
                        RETURN NULL;
                    END IF;
                    hash := substring(p_value FROM first_start + 1 FOR 32);
                END IF;
            END LOOP;
            IF pos <> n THEN
                RETURN NULL;
            END IF;
            RETURN hash;
        END
        $kvsync_manifest_hash$
        """

    /// The manifest's rows by the hash they name: `kvsync_blob_read`'s and `kvsync_blob_gc`'s check
    /// that a current manifest row references a blob is one probe, not a scan of the group's manifest.
    /// Partial: no other row of `kvsync_state` is in it, so a push without manifest changes pays
    /// nothing for it.
    static let manifestIndex = """
        CREATE INDEX kvsync_state_manifest ON kvsync_state (group_id, kvsync_manifest_hash(value))
        WHERE kind = '\(manifestKind)' AND name = '\(manifestName)' AND value IS NOT NULL
        """

    /// `kvsync_blob_referenced(group, hash)`: whether a current manifest row of `group` names `hash`
    /// (``referencedCondition``), for `kvsync_blob_read`.
    ///
    /// As the tables' owner (`SECURITY DEFINER`), so that the check is one probe of ``manifestIndex``
    /// for a gateway too: under row-level security PostgreSQL uses no index for a condition that
    /// calls a function not marked `LEAKPROOF` (only a superuser may mark one), and the check would
    /// read every manifest row of the group, per chunk read. It answers one boolean, and in a
    /// transaction scoped to a group only for that group (false for another): nothing a scoped
    /// transaction could not read itself. PL/pgSQL, whose plan a session keeps: an SQL function's is
    /// made again at every call (measured on the shared 2-core machine, 5,000 manifest rows in the
    /// group, as the gateway's role: 1.0–1.7 ms a read with SQL, 0.5 ms with PL/pgSQL, 0.3 ms a head;
    /// the same check inline, under row-level security, scanned the group's manifest: 68 ms).
    static let blobReferencedFunction = """
        CREATE FUNCTION kvsync_blob_referenced(p_group text, p_sha256 bytea) RETURNS boolean
        LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $kvsync_blob_referenced$
        BEGIN
            RETURN p_group = coalesce(nullif(\(ServerSetting.group.current), ''), p_group)
                   AND \(referencedCondition(group: "p_group", hash: "p_sha256"));
        END
        $kvsync_blob_referenced$
        """

    /// `kvsync_blob_head(group, hash)`: the blob's size, received bytes and whether it is complete; no
    /// row for an unknown hash, and (row-level security) for another group's.
    static let blobHeadFunction = """
        CREATE FUNCTION kvsync_blob_head(p_group text, p_sha256 bytea)
        RETURNS TABLE (size bigint, received bigint, complete boolean)
        LANGUAGE plpgsql STABLE AS $kvsync_blob_head$
        BEGIN
            \(blobScopeCheck("kvsync_blob_head"))
            RETURN QUERY SELECT b.size, b.received, b.complete FROM kvsync_blobs b
                WHERE b.group_id = p_group AND b.sha256 = p_sha256;
        END
        $kvsync_blob_head$
        """

    /// `kvsync_blob_put(group, hash, size, offset, data, max_file_bytes, max_group_bytes)`: stores one
    /// chunk of an upload at its offset, and answers one row `(outcome, figure)` with a
    /// ``SyncWire/BlobPutOutcome`` name, in the contract's order of checks: `chunk_too_large`,
    /// `too_large`, `complete`, `size_mismatch`, `offset_mismatch`, `quota_exceeded`; then the chunk
    /// is stored. When the last byte arrives the chunks are hashed in order: equal to the name, the
    /// blob is complete (`accepted` with its size); not, the blob and its chunks are deleted
    /// (`hash_mismatch`) and nothing of it was ever served.
    ///
    /// A request no honest client makes (a hash not 32 bytes, a negative offset or size, a chunk that
    /// ends past the size, a NULL) raises one line: a gateway checks these first and answers 400. The
    /// blob's row lock serializes puts of one blob; a group's lock (advisory, taken only to start a new
    /// blob) serializes the quota's count, so two uploads started together cannot both fit in what
    /// only one does.
    static let blobPutFunction = """
        CREATE FUNCTION kvsync_blob_put(p_group text, p_sha256 bytea, p_size bigint, p_offset bigint, p_data bytea,
                                        p_max_file_bytes bigint, p_max_group_bytes bigint)
        RETURNS TABLE (outcome text, figure bigint)
        LANGUAGE plpgsql AS $kvsync_blob_put$
        DECLARE
            len bigint := octet_length(p_data);
            cur_size bigint;
            cur_received bigint;
            cur_complete boolean;
            used bigint;
            whole bytea;
            locked boolean := false;
        BEGIN
            \(blobScopeCheck("kvsync_blob_put"))
            IF coalesce(\(ServerSetting.readOnly.current), '') = 'on' THEN
                RAISE EXCEPTION 'kvsync_blob_put: this credential is read-only' USING ERRCODE = '42501';
            END IF;
            IF p_size IS NULL OR p_offset IS NULL OR p_data IS NULL OR p_max_file_bytes IS NULL OR p_max_group_bytes IS NULL THEN
                RAISE EXCEPTION 'kvsync_blob_put: the size, offset, data and both limits are needed (one is NULL)' USING ERRCODE = '22004';
            END IF;
            IF p_size < 0 OR p_offset < 0 OR p_max_file_bytes < 0 OR p_max_group_bytes < 0 THEN
                RAISE EXCEPTION 'kvsync_blob_put: a negative size (%), offset (%) or limit (%, %)', p_size, p_offset, p_max_file_bytes, p_max_group_bytes
                    USING ERRCODE = '22023';
            END IF;
            IF len > \(chunkBytes) THEN
                outcome := 'chunk_too_large'; figure := \(chunkBytes);
                RETURN NEXT;
                RETURN;
            END IF;
            IF p_size > p_max_file_bytes THEN
                outcome := 'too_large'; figure := p_max_file_bytes;
                RETURN NEXT;
                RETURN;
            END IF;
            IF p_offset > p_size - len THEN
                RAISE EXCEPTION 'kvsync_blob_put: a chunk of % bytes at offset % ends past the blob''s size, %', len, p_offset, p_size
                    USING ERRCODE = '22023';
            END IF;
            LOOP
                SELECT b.size, b.received, b.complete INTO cur_size, cur_received, cur_complete FROM kvsync_blobs b
                    WHERE b.group_id = p_group AND b.sha256 = p_sha256 FOR UPDATE;
                EXIT WHEN FOUND;
                -- A new blob: it starts at 0, and fits in the group's quota with its whole size.
                IF p_offset <> 0 THEN
                    outcome := 'offset_mismatch'; figure := 0;
                    RETURN NEXT;
                    RETURN;
                END IF;
                IF NOT locked THEN
                    -- Under the group's lock, the blob is looked for again (a put of it may have
                    -- committed meanwhile) before the quota is counted.
                    PERFORM pg_advisory_xact_lock(\(blobLockClass), hashtext(p_group));
                    locked := true;
                    CONTINUE;
                END IF;
                SELECT coalesce(sum(b.size), 0) INTO used FROM kvsync_blobs b WHERE b.group_id = p_group;
                IF used > p_max_group_bytes - p_size THEN
                    outcome := 'quota_exceeded'; figure := p_max_group_bytes;
                    RETURN NEXT;
                    RETURN;
                END IF;
                -- (Chunks a blob row no longer names, left by a hand that deleted it, go first.)
                DELETE FROM kvsync_blob_chunks c WHERE c.group_id = p_group AND c.sha256 = p_sha256;
                INSERT INTO kvsync_blobs (group_id, sha256, size) VALUES (p_group, p_sha256, p_size)
                    ON CONFLICT DO NOTHING;
                -- Another put started the same blob meanwhile: its row is locked and checked as any.
            END LOOP;
            IF cur_complete THEN
                outcome := 'complete'; figure := 0;
                RETURN NEXT;
                RETURN;
            END IF;
            IF cur_size <> p_size THEN
                outcome := 'size_mismatch'; figure := cur_size;
                RETURN NEXT;
                RETURN;
            END IF;
            IF cur_received <> p_offset THEN
                outcome := 'offset_mismatch'; figure := cur_received;
                RETURN NEXT;
                RETURN;
            END IF;
            IF len > 0 THEN
                INSERT INTO kvsync_blob_chunks (group_id, sha256, "offset", data) VALUES (p_group, p_sha256, p_offset, p_data);
            END IF;
            IF p_offset + len < p_size THEN
                UPDATE kvsync_blobs b SET received = p_offset + len, updated_at = now()
                    WHERE b.group_id = p_group AND b.sha256 = p_sha256;
                outcome := 'accepted'; figure := p_offset + len;
                RETURN NEXT;
                RETURN;
            END IF;
            -- The last byte: the whole, hashed again.
            SELECT sha256(coalesce(string_agg(c.data, ''::bytea ORDER BY c."offset"), ''::bytea)) INTO whole
                FROM kvsync_blob_chunks c WHERE c.group_id = p_group AND c.sha256 = p_sha256;
            IF whole = p_sha256 THEN
                UPDATE kvsync_blobs b SET received = p_size, complete = true, updated_at = now(), completed_at = now()
                    WHERE b.group_id = p_group AND b.sha256 = p_sha256;
                outcome := 'accepted'; figure := p_size;
            ELSE
                DELETE FROM kvsync_blob_chunks c WHERE c.group_id = p_group AND c.sha256 = p_sha256;
                DELETE FROM kvsync_blobs b WHERE b.group_id = p_group AND b.sha256 = p_sha256;
                outcome := 'hash_mismatch'; figure := 0;
            END IF;
            RETURN NEXT;
        END
        $kvsync_blob_put$
        """

    /// The first key of the advisory lock a new blob takes for its group (`pg_advisory_xact_lock(int,
    /// int)`, whose keys never meet the one-key locks of ``migrationLock``): "kvsb".
    static let blobLockClass = 0x6B76_7362

    /// `kvsync_blob_read(group, hash, offset, length)`: the blob's size and its bytes from `offset`,
    /// `length` at most (up to ``BlobWire/chunkBytes``), clipped to its size; one row only when the
    /// blob is complete and a current manifest row of the group names it, none otherwise. Only the
    /// chunks that overlap the range are read, and of each only the slice needed.
    static let blobReadFunction = """
        CREATE FUNCTION kvsync_blob_read(p_group text, p_sha256 bytea, p_offset bigint, p_length integer)
        RETURNS TABLE (size bigint, data bytea)
        LANGUAGE plpgsql STABLE AS $kvsync_blob_read$
        DECLARE
            total bigint;
            stop bigint;
        BEGIN
            \(blobScopeCheck("kvsync_blob_read"))
            IF p_offset IS NULL OR p_length IS NULL OR p_offset < 0 OR p_length < 0 OR p_length > \(chunkBytes) THEN
                RAISE EXCEPTION 'kvsync_blob_read: an offset of 0 or more and a length from 0 to \(chunkBytes), not % and %', p_offset, p_length
                    USING ERRCODE = '22023';
            END IF;
            SELECT b.size INTO total FROM kvsync_blobs b
                WHERE b.group_id = p_group AND b.sha256 = p_sha256 AND b.complete AND kvsync_blob_referenced(p_group, p_sha256);
            IF NOT FOUND THEN
                RETURN;
            END IF;
            stop := least(total, p_offset + p_length);
            size := total;
            -- A chunk is at most \(chunkBytes) bytes: the first that overlaps starts after p_offset - \(chunkBytes).
            SELECT coalesce(string_agg(substring(c.data FROM (greatest(p_offset, c."offset") - c."offset" + 1)::integer
                                                 FOR (least(stop, c."offset" + octet_length(c.data)) - greatest(p_offset, c."offset"))::integer),
                                       ''::bytea ORDER BY c."offset"), ''::bytea)
                INTO data
                FROM kvsync_blob_chunks c
                WHERE c.group_id = p_group AND c.sha256 = p_sha256
                  AND c."offset" > p_offset - \(chunkBytes) AND c."offset" < stop
                  AND c."offset" + octet_length(c.data) > p_offset;
            RETURN NEXT;
        END
        $kvsync_blob_read$
        """

    /// `kvsync_blob_gc(uploading_grace, unreferenced_grace, dry_run)`: the blobs it removes (or, in a
    /// dry run, would): uploads not touched for `uploading_grace`, and complete blobs that no current
    /// manifest row of their group names and that were not completed or referenced by a push for
    /// `unreferenced_grace`. The owner's (revoked from everyone else): it runs across every group.
    ///
    /// A push that takes a manifest row touches its blob (``blobsCheck``), under the blob's row lock: a
    /// collection that meets it waits, and then sees the row touched now and spares it. So a blob is
    /// never removed from under the manifest row that names it.
    static let blobGCFunction = """
        CREATE FUNCTION kvsync_blob_gc(p_uploading_grace interval, p_unreferenced_grace interval, p_dry_run boolean)
        RETURNS TABLE (group_id text, sha256 bytea, size bigint, complete boolean)
        LANGUAGE plpgsql AS $kvsync_blob_gc$
        BEGIN
            IF p_uploading_grace IS NULL OR p_unreferenced_grace IS NULL OR p_dry_run IS NULL THEN
                RAISE EXCEPTION 'kvsync_blob_gc: both graces and the dry-run flag are needed (one is NULL)' USING ERRCODE = '22004';
            END IF;
            IF p_dry_run THEN
                RETURN QUERY SELECT b.group_id, b.sha256, b.size, b.complete FROM kvsync_blobs b
                    WHERE \(collectable)
                    ORDER BY 1, 2;
                RETURN;
            END IF;
            RETURN QUERY
            WITH gone AS (
                DELETE FROM kvsync_blobs b WHERE \(collectable)
                RETURNING b.group_id, b.sha256, b.size, b.complete),
            chunks AS (
                DELETE FROM kvsync_blob_chunks c USING gone g WHERE c.group_id = g.group_id AND c.sha256 = g.sha256)
            SELECT g.group_id, g.sha256, g.size, g.complete FROM gone g ORDER BY 1, 2;
        END
        $kvsync_blob_gc$
        """

    /// Which blob (alias `b`) a collection removes.
    static var collectable: String {
        """
        (NOT b.complete AND b.updated_at < now() - p_uploading_grace)
                       OR (b.complete AND greatest(b.updated_at, b.completed_at) < now() - p_unreferenced_grace
                           AND NOT \(referencedCondition(group: "b.group_id", hash: "b.sha256")))
        """
    }

    /// What `kvsync_push` (from revision 5) runs before it applies a batch, under the group's lock:
    /// the indexes of the batch's manifest changes (kind `collection`, name `_files`, not a delete)
    /// whose value names no complete blob of the group, into `missing_blobs` (NULL when none). Those
    /// are answered `missing_blob` and not applied; the rest of the batch is applied as usual.
    ///
    /// A batch without a manifest change pays one scan of its names array. The blobs a batch names
    /// are touched (`updated_at`) under their row locks, so that a collection running meanwhile
    /// spares them (``blobGCFunction``).
    static let blobsCheck = """
        IF '\(manifestName)' = ANY(p_names) THEN
                    WITH wanted AS (
                        SELECT u.i::integer AS i, kvsync_manifest_hash(u.val) AS h
                        FROM unnest(p_kinds, p_names, p_values, p_deleted) WITH ORDINALITY AS u(kind, name, val, del, i)
                        WHERE u.kind = '\(manifestKind)' AND u.name = '\(manifestName)' AND NOT u.del),
                    present AS (
                        UPDATE kvsync_blobs b SET updated_at = now()
                        WHERE b.group_id = p_group AND b.complete AND b.sha256 IN (SELECT w.h FROM wanted w WHERE w.h IS NOT NULL)
                        RETURNING b.sha256)
                    SELECT array_agg(w.i ORDER BY w.i) INTO missing_blobs FROM wanted w
                    WHERE w.h IS NULL OR w.h NOT IN (SELECT p.sha256 FROM present p);
                END IF;
        """

    /// The statements of schema version 7.
    static var blobMigration: [String] {
        [
            """
            CREATE TABLE kvsync_blobs (
                group_id text NOT NULL,
                sha256 bytea NOT NULL CHECK (octet_length(sha256) = 32),
                size bigint NOT NULL CHECK (size >= 0),
                received bigint NOT NULL DEFAULT 0 CHECK (received >= 0 AND received <= size),
                complete boolean NOT NULL DEFAULT false,
                created_at timestamptz NOT NULL DEFAULT now(),
                updated_at timestamptz NOT NULL DEFAULT now(),
                completed_at timestamptz,
                PRIMARY KEY (group_id, sha256))
            PARTITION BY HASH (group_id)
            """,
            """
            CREATE TABLE kvsync_blob_chunks (
                group_id text NOT NULL,
                sha256 bytea NOT NULL,
                "offset" bigint NOT NULL CHECK ("offset" >= 0),
                data bytea NOT NULL,
                PRIMARY KEY (group_id, sha256, "offset"))
            PARTITION BY HASH (group_id)
            """,
            """
            DO $$ BEGIN
                FOR i IN 0..\(partitions - 1) LOOP
                    EXECUTE format('CREATE TABLE kvsync_blobs_p%s PARTITION OF kvsync_blobs FOR VALUES WITH (MODULUS \(partitions), REMAINDER %s)', i, i);
                    EXECUTE format('CREATE TABLE kvsync_blob_chunks_p%s PARTITION OF kvsync_blob_chunks FOR VALUES WITH (MODULUS \(partitions), REMAINDER %s)', i, i);
                END LOOP;
            END $$
            """,
            // (On the partitioned table, the partitions follow.)
            "ALTER TABLE kvsync_blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL",
            "ALTER TABLE kvsync_blobs ENABLE ROW LEVEL SECURITY",
            "ALTER TABLE kvsync_blob_chunks ENABLE ROW LEVEL SECURITY",
            groupScopePolicy(on: "kvsync_blobs"),
            groupScopePolicy(on: "kvsync_blob_chunks"),
            manifestHashFunction,
            manifestIndex,
            blobReferencedFunction,
            "REVOKE ALL ON FUNCTION kvsync_blob_referenced(text, bytea) FROM PUBLIC",
            blobHeadFunction,
            blobPutFunction,
            blobReadFunction,
            blobGCFunction,
            "REVOKE ALL ON FUNCTION kvsync_blob_gc(interval, interval, boolean) FROM PUBLIC",
            // kvsync_push revision 5: the missing_blob rule.
            pushFunction(scopeChecks: scopeChecks),
            grants,
        ]
    }
}
#endif
