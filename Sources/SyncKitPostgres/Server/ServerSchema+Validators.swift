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
    /// - ``validateFunction``: runs a collection's validators in the order of their names; its body is
    ///   rewritten by the registry's trigger (``dispatchFunction``) with a static call of each.
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
            validateOneFunction,
            "REVOKE ALL ON FUNCTION kvsync_validate_one(oid, text, bytea, jsonb, jsonb, text) FROM PUBLIC",
            validateFunction(body: ""),
            "REVOKE ALL ON FUNCTION \(validateSignature) FROM PUBLIC",
            dispatchFunction,
            """
            CREATE TRIGGER kvsync_validators_dispatch AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON kvsync_validators
            FOR EACH STATEMENT EXECUTE FUNCTION kvsync_validators_dispatch()
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

    /// The SQLSTATE test of an error that says nothing about the change (it fails the push, see
    /// ``validateFunction``), for the `EXCEPTION` handlers around a validator's call.
    /// (`percent` is how a `%` is written: doubled inside a `format` string.)
    static func transientError(percent: String = "%") -> String {
        "SQLSTATE LIKE '40\(percent)' OR SQLSTATE LIKE '53\(percent)' OR SQLSTATE LIKE '57\(percent)' OR SQLSTATE LIKE '08\(percent)' OR SQLSTATE = '55P03'"
    }

    /// `kvsync_validate(group, kind, name, key, new, old, device)`: the first refusal of the
    /// collection's validators (in the order of their names), or NULL when each accepts. Its body is
    /// written by the registry's trigger (``dispatchFunction``) each time the registry changes; the
    /// migration makes the one of an empty registry.
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
    static func validateFunction(body: String) -> String {
        """
        CREATE OR REPLACE FUNCTION kvsync_validate(p_group text, p_kind text, p_name text, p_key bytea, p_new jsonb,
                                                   p_old jsonb, p_device text)
        RETURNS text
        LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $kvsync_validate$
        DECLARE
            reason text;
        BEGIN
        \(body)
            RETURN NULL;
        END
        $kvsync_validate$
        """
    }

    /// `kvsync_validators_dispatch()`, the registry's trigger: writes ``validateFunction``'s body with
    /// a static call of each registered function, one `IF` per validator in the order of the
    /// collection and the functions' names.
    ///
    /// Why static calls: `EXECUTE` plans its statement on every call, and with the registry's lookup
    /// that cost about 20 µs a validated change (measured with psql on the shared 2-core machine: 50,000
    /// calls of a one-line SQL validator in 1.0 s through `EXECUTE`, 0.09 s through a static call);
    /// a static call's plan is kept for the session. The call goes through the function's schema and
    /// name only while the registered function still has them (one probe of `pg_proc` by oid, about
    /// 1 µs); otherwise (renamed, dropped, or dropped and made again under another oid)
    /// ``validateOneFunction`` looks it up as before: called by its new name, or the change refused.
    /// The trigger runs as the one who writes the registry: the owner, who owns `kvsync_validate`
    /// (`CREATE OR REPLACE` keeps its owner and grants).
    static var dispatchFunction: String {
        """
        CREATE FUNCTION kvsync_validators_dispatch() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT
        AS $kvsync_dispatch$
        DECLARE
            body text := '';
            r record;
        BEGIN
            FOR r IN
                SELECT v.kind, v.name, v.fn::oid AS fn, p.proname, n.nspname
                FROM kvsync_validators v
                LEFT JOIN pg_proc p ON p.oid = v.fn
                LEFT JOIN pg_namespace n ON n.oid = p.pronamespace
                ORDER BY v.kind, v.name, v.fn::text, v.fn::oid
            LOOP
                body := body || format($step$
            IF p_kind = %1$L AND p_name = %2$L THEN
                %3$s
                IF reason IS NOT NULL THEN
                    RETURN left(CASE WHEN reason = '' THEN 'refused by ' || %4$s::oid::regprocedure::text ELSE reason END,
                                \(PushOutcome.maxReasonCharacters));
                END IF;
            END IF;$step$, r.kind, r.name,
                    CASE WHEN r.proname IS NULL THEN
                        format('reason := kvsync_validate_one(%s, p_group, p_key, p_new, p_old, p_device);', r.fn)
                    ELSE format($call$IF EXISTS (SELECT FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                           WHERE p.oid = %1$s AND p.proname = %2$L AND n.nspname = %3$L) THEN
                    BEGIN
                        reason := %3$I.%2$I(p_group, p_key, p_new, p_old, p_device);
                    EXCEPTION WHEN OTHERS THEN
                        IF \(transientError(percent: "%%")) THEN
                            RAISE;
                        END IF;
                        reason := SQLERRM;
                    END;
                ELSE
                    reason := kvsync_validate_one(%1$s, p_group, p_key, p_new, p_old, p_device);
                END IF;$call$, r.fn, r.proname, r.nspname) END,
                    r.fn);
            END LOOP;
            EXECUTE format($template$\(validateFunction(body: "%s"))$template$, body);
            RETURN NULL;
        END
        $kvsync_dispatch$
        """
    }

    /// `kvsync_validate_one(fn, group, key, new, old, device)`: one validator called by its current
    /// name through `EXECUTE` (the way around a static call whose function was renamed or dropped),
    /// or the refusal that names a function which no longer exists.
    static var validateOneFunction: String {
        """
        CREATE FUNCTION kvsync_validate_one(p_fn oid, p_group text, p_key bytea, p_new jsonb, p_old jsonb, p_device text)
        RETURNS text
        LANGUAGE plpgsql SET search_path FROM CURRENT AS $kvsync_validate_one$
        DECLARE
            statement text;
            reason text;
        BEGIN
            SELECT format('SELECT %I.%I($1, $2, $3, $4, $5)', n.nspname, p.proname) INTO statement
            FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE p.oid = p_fn;
            IF statement IS NULL THEN
                RETURN format('the validator %s of this collection no longer exists', p_fn);
            END IF;
            BEGIN
                EXECUTE statement INTO reason USING p_group, p_key, p_new, p_old, p_device;
            EXCEPTION WHEN OTHERS THEN
                IF \(transientError()) THEN
                    RAISE;
                END IF;
                reason := SQLERRM;
            END;
            RETURN reason;
        END
        $kvsync_validate_one$
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
