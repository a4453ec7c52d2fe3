#if PostgreSQL
import SyncWire

extension ServerSchema {
    /// Part of schema version 8 (``backendMigration``): validators per collection, called inside the
    /// push (issue 50).
    ///
    /// - `kvsync_validators(kind, name, fn)`: the registry, written by the owner only. `fn` is a
    ///   function `(p_group text, p_key bytea, p_new jsonb, p_old jsonb, p_device text) RETURNS text`
    ///   (checked when the row is written, one line naming the function otherwise): NULL accepts the
    ///   change, anything else refuses it with that reason. `p_new` is NULL for a delete, `p_old` when
    ///   the server has no value for the key (no row, or a tombstone).
    /// - ``validateFunction``: runs a collection's validators in the order of their names.
    /// - `kvsync_push` revision 6 calls it for each change of a collection that has validators
    ///   (``validatedColumn``, ``loopValidation``) and answers `rejected: <reason>` with the server's
    ///   current row.
    static var validatorMigration: [String] {
        [
            """
            CREATE TABLE kvsync_validators (
                kind text NOT NULL,
                name text NOT NULL,
                fn regprocedure NOT NULL,
                PRIMARY KEY (kind, name, fn))
            """,
            // Which collections have validators is no secret (function names, no data): any role that
            // may push reads it, once per batch.
            "REVOKE ALL ON kvsync_validators FROM PUBLIC",
            "GRANT SELECT ON kvsync_validators TO PUBLIC",
            validatorSignatureCheck,
            """
            CREATE TRIGGER kvsync_validators_signature BEFORE INSERT OR UPDATE ON kvsync_validators
            FOR EACH ROW EXECUTE FUNCTION kvsync_validator_signature()
            """,
            validateFunction,
            "REVOKE ALL ON FUNCTION \(validateSignature) FROM PUBLIC",
            // Until part A's kvsync_cbor_to_jsonb is merged: a stub (dropped at merge).
            """
            DO $$ BEGIN
                IF to_regprocedure('kvsync_cbor_to_jsonb(bytea)') IS NULL THEN
                    CREATE FUNCTION kvsync_cbor_to_jsonb(bytea) RETURNS jsonb LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
                    AS 'SELECT jsonb_build_object(''$invalid'', encode(substr($1, 1, 32), ''hex''))';
                END IF;
            END $$
            """,
            // kvsync_push revision 6: the validators' rejections.
            pushFunction(scopeChecks: scopeChecks),
            grants,
        ]
    }

    /// `kvsync_validate`'s name with its argument types (its grants, `to_regprocedure`).
    static let validateSignature = "kvsync_validate(text, text, text, bytea, jsonb, jsonb, text)"

    /// Refuses a registry row whose function does not take a validator's arguments or return text:
    /// found when the owner writes the row, in one line, not at the first push of the collection.
    static let validatorSignatureCheck = """
        CREATE FUNCTION kvsync_validator_signature() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            IF NOT EXISTS (SELECT FROM pg_proc p WHERE p.oid = NEW.fn AND p.prokind = 'f' AND NOT p.proretset
                           AND p.prorettype = 'text'::regtype
                           AND p.pronargs = 5 AND p.proargtypes[0] = 'text'::regtype AND p.proargtypes[1] = 'bytea'::regtype
                           AND p.proargtypes[2] = 'jsonb'::regtype AND p.proargtypes[3] = 'jsonb'::regtype
                           AND p.proargtypes[4] = 'text'::regtype) THEN
                RAISE EXCEPTION 'kvsync_validators: % is not a function (p_group text, p_key bytea, p_new jsonb, p_old jsonb, p_device text) RETURNS text',
                    NEW.fn USING ERRCODE = '42P13';
            END IF;
            RETURN NEW;
        END
        $$
        """

    /// `kvsync_validate(group, kind, name, key, new, old, device)`: the first refusal of the
    /// collection's validators (in the order of their names), or NULL when each accepts.
    ///
    /// - SECURITY DEFINER: a validator is the owner's code and runs with the owner's privileges
    ///   (it may read the app's own tables, which the gateway's role must never be granted); the
    ///   gateway's role may only call this function, which calls nothing but the registry's functions.
    /// - A validator that raises an error refuses the change with the error's message: each call is
    ///   its own subtransaction (BEGIN … EXCEPTION), so what the validator wrote is rolled back with it,
    ///   and the push goes on with the next change. Never an accept, never a failed batch, except for
    ///   an error that says nothing about the change: a serialization failure or deadlock (class 40),
    ///   a lack of resources (53), an operator's intervention or a cancel, a statement timeout among
    ///   them (57), a lock not available (55P03), a lost connection (08). Those fail the push, which the
    ///   device sends again; a refusal then would drop a good write for good.
    /// - A function removed after it was registered refuses every change of its collection (naming it):
    ///   the owner's rule is never skipped.
    /// - The reason is cut to ``PushOutcome/maxReasonCharacters`` (it travels to the device); an empty
    ///   one becomes "refused by <function>".
    static var validateFunction: String {
        """
        CREATE FUNCTION kvsync_validate(p_group text, p_kind text, p_name text, p_key bytea, p_new jsonb, p_old jsonb,
                                        p_device text)
        RETURNS text
        LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $kvsync_validate$
        DECLARE
            validator regprocedure;
            statement text;
            reason text;
        BEGIN
            FOR validator, statement IN
                SELECT v.fn, CASE WHEN p.oid IS NOT NULL THEN format('SELECT %I.%I($1, $2, $3, $4, $5)', n.nspname, p.proname) END
                FROM kvsync_validators v
                LEFT JOIN pg_proc p ON p.oid = v.fn
                LEFT JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE v.kind = p_kind AND v.name = p_name
                ORDER BY v.fn::text, v.fn::oid
            LOOP
                IF statement IS NULL THEN
                    RETURN format('the validator %s of this collection no longer exists', validator::oid);
                END IF;
                BEGIN
                    EXECUTE statement INTO reason USING p_group, p_key, p_new, p_old, p_device;
                EXCEPTION WHEN OTHERS THEN
                    IF SQLSTATE LIKE '40%' OR SQLSTATE LIKE '53%' OR SQLSTATE LIKE '57%' OR SQLSTATE LIKE '08%'
                       OR SQLSTATE = '55P03' THEN
                        RAISE;
                    END IF;
                    reason := SQLERRM;
                END;
                IF reason IS NOT NULL THEN
                    RETURN left(CASE WHEN reason = '' THEN 'refused by ' || validator::text ELSE reason END,
                                \(PushOutcome.maxReasonCharacters));
                END IF;
            END LOOP;
            RETURN NULL;
        END
        $kvsync_validate$
        """
    }

    /// Whether a batch has a change of a collection with validators (one probe of the registry per
    /// batch): a batch without one takes revision 5's statements and pays for nothing else.
    static let batchValidated = """
        validated := EXISTS (SELECT FROM kvsync_validators v JOIN unnest(p_kinds, p_names) AS u(kind, name)
                             ON v.kind = u.kind AND v.name = u.name);
        """

    /// The SQL expression of one change's refusal: its validators' reason, or NULL when they accept
    /// it or its collection has none (`value` is NULL for a delete, `current` the server's value).
    static func validation(kind: String, name: String, key: String, value: String, current: String) -> String {
        """
        CASE WHEN validated AND EXISTS (SELECT FROM kvsync_validators vv WHERE vv.kind = \(kind) AND vv.name = \(name))
                     THEN kvsync_validate(p_group, \(kind), \(name), \(key), kvsync_cbor_to_jsonb(\(value)),
                                          kvsync_cbor_to_jsonb(\(current)), p_device) END
        """
    }
}
#endif
