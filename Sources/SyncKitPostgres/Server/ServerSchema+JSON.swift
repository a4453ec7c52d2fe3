#if PostgreSQL
/// Part of schema version 8 (issue 50): synced values as JSON in SQL, and JSON back to CBOR, in
/// PL/pgSQL (no extension, no untrusted language: any managed PostgreSQL with a UTF-8 database).
///
/// - `kvsync_cbor_to_jsonb(bytea) → jsonb` is total: any bytes give a value, never an error. One
///   well-formed CBOR item (RFC 8949, within ``CBORLimits/default``: 16 MiB, 64 levels) gives what
///   `JSONValue(cbor:)` gives in Swift (the RFC 8949 §6.1 mapping of `kvtool`'s JSON), parsed as
///   `jsonb`; anything else gives `{"$invalid": "<hex of at most the first 32 bytes>"}`, as
///   `JSONValue.projecting(_:)` does. NULL (a tombstone) gives NULL.
/// - `kvsync_jsonb_to_cbor(jsonb) → bytea` writes deterministic CBOR (RFC 8949 §4.2.1), the bytes
///   `CBOREncoder` writes for the same value held as dictionaries, arrays, integers, `Double`s,
///   strings, booleans and nil.
///
/// Both are `IMMUTABLE PARALLEL SAFE STRICT` and `SECURITY INVOKER`: pure functions, granted to
/// PUBLIC. The `kvsync_cbor_*` helpers are theirs; they are called with the search path that the
/// two public functions fix (`SET search_path FROM CURRENT`), so a caller's own functions of the same
/// names are never called instead.
///
/// Work is linear in the input's size: the parser keeps its own stack (no recursion, so no input
/// exhausts the server's stack), builds the JSON text in an array of pieces (no quadratic
/// concatenation) and checks a map's keys for duplicates once, by sorting, when the map ends. How
/// deep a value nests is bounded as a device's decoder bounds it (64 arrays, maps and tags), so a
/// value is invalid here exactly when it is invalid on a device.
extension ServerSchema {
    static var jsonMigration: [String] {
        [
            #"""
            CREATE FUNCTION kvsync_cbor_json_string(s text) RETURNS text
            LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT AS $fn$
            DECLARE
                c int;
            BEGIN
                s := replace(replace(s, E'\\', E'\\\\'), '"', E'\\"');
                IF s ~ E'[\\x01-\\x1f\\x7f]' THEN
                    s := replace(replace(replace(s, E'\n', E'\\n'), E'\r', E'\\r'), E'\t', E'\\t');
                    FOREACH c IN ARRAY ARRAY[1,2,3,4,5,6,7,8,11,12,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,127] LOOP
                        s := replace(s, chr(c), E'\\u00' || lpad(to_hex(c), 2, '0'));
                    END LOOP;
                END IF;
                RETURN '"' || s || '"';
            END
            $fn$;
            """#,
            #"""
            CREATE FUNCTION kvsync_cbor_float_text(x float8, neg boolean) RETURNS text
            LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT SET extra_float_digits = 1 AS $fn$
            DECLARE
                t text;
            BEGIN
                IF x = trunc(x) AND abs(x) < 1e15 THEN
                    RETURN CASE WHEN neg THEN '-' ELSE '' END || abs(x)::bigint::text || '.0';
                END IF;
                t := x::text;
                IF abs(x) > 9007199254740992 OR abs(x) < 1e-4 THEN
                    RETURN t;
                END IF;
                t := trim_scale(t::numeric)::text;
                RETURN CASE WHEN position('.' in t) = 0 THEN t || '.0' ELSE t END;
            END
            $fn$;
            """#,
            #"""
            CREATE FUNCTION kvsync_cbor_date_text(secs numeric) RETURNS text
            LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT AS $fn$
            DECLARE
                ms bigint;
                days bigint; r bigint; z bigint; era bigint; doe bigint; yoe bigint; doy bigint; mp bigint;
                y bigint; m bigint; d bigint;
            BEGIN
                IF secs < -62167219200 OR secs >= 253402300800 THEN RETURN NULL; END IF;
                ms := floor(secs * 1000);
                days := floor(ms / 86400000.0);
                r := ms - days * 86400000;
                z := days + 719468;
                era := floor(z / 146097.0);
                doe := z - era * 146097;
                yoe := (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
                y := yoe + era * 400;
                doy := doe - (365 * yoe + yoe / 4 - yoe / 100);
                mp := (5 * doy + 2) / 153;
                d := doy - (153 * mp + 2) / 5 + 1;
                m := CASE WHEN mp < 10 THEN mp + 3 ELSE mp - 9 END;
                IF m <= 2 THEN y := y + 1; END IF;
                RETURN '"' || lpad(y::text, 4, '0') || '-' || lpad(m::text, 2, '0') || '-' || lpad(d::text, 2, '0')
                    || 'T' || lpad((r / 3600000)::text, 2, '0') || ':' || lpad((r / 60000 % 60)::text, 2, '0')
                    || ':' || lpad((r / 1000 % 60)::text, 2, '0') || '.' || lpad((r % 1000)::text, 3, '0') || '"';
            END
            $fn$;
            """#,
            // A float16/32/64 at offset p (info 25, 26, 27) as float8, or NULL for NaN and infinities.
            #"""
            CREATE FUNCTION kvsync_cbor_float(v bytea, p int, info int) RETURNS float8
            LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT AS $fn$
            DECLARE
                hi bigint; f bigint; e int; s boolean; x float8;
            BEGIN
                IF info = 25 THEN
                    hi := (get_byte(v, p) << 8) | get_byte(v, p + 1);
                    s := hi >= 32768; e := (hi >> 10) & 31; f := hi & 1023;
                    IF e = 31 THEN RETURN NULL; END IF;
                    x := CASE WHEN e = 0 THEN f * power(2::float8, -24) ELSE (f + 1024) * power(2::float8, e - 25) END;
                ELSIF info = 26 THEN
                    hi := (get_byte(v, p)::bigint << 24) | (get_byte(v, p + 1) << 16) | (get_byte(v, p + 2) << 8) | get_byte(v, p + 3);
                    s := hi >= 2147483648; e := (hi >> 23) & 255; f := hi & 8388607;
                    IF e = 255 THEN RETURN NULL; END IF;
                    x := CASE WHEN e = 0 THEN f * power(2::float8, -149) ELSE (f + 8388608) * power(2::float8, e - 150) END;
                ELSE
                    hi := (get_byte(v, p)::bigint << 24) | (get_byte(v, p + 1) << 16) | (get_byte(v, p + 2) << 8) | get_byte(v, p + 3);
                    s := hi >= 2147483648; e := (hi >> 20) & 2047;
                    f := ((hi & 1048575) << 32) | (get_byte(v, p + 4)::bigint << 24) | (get_byte(v, p + 5) << 16) | (get_byte(v, p + 6) << 8) | get_byte(v, p + 7);
                    IF e = 2047 THEN RETURN NULL; END IF;
                    x := CASE WHEN e = 0 THEN f * power(2::float8, -1074) ELSE (f + 4503599627370496) * power(2::float8, e - 1075) END;
                END IF;
                RETURN CASE WHEN s THEN -x ELSE x END;
            END
            $fn$;
            """#,
            // Whether the bytes are UTF-8 that a jsonb string can hold: well formed (RFC 3629: no overlong
            // form, no surrogate, nothing past U+10FFFF) and without U+0000, which PostgreSQL's text refuses.
            // Checked on the hex text by a regular expression, because convert_from raises an error, and
            // catching one needs a subtransaction, which a parallel worker may not start.
            #"""
            CREATE FUNCTION kvsync_cbor_utf8(b bytea) RETURNS boolean
            LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $fn$
                SELECT encode(b, 'hex') ~ ('^(0[1-9a-f]|[1-7][0-9a-f]|(c[2-9a-f]|d[0-9a-f])[89ab][0-9a-f]'
                    || '|e0[ab][0-9a-f][89ab][0-9a-f]|(e[1-9a-c]|e[ef])[89ab][0-9a-f][89ab][0-9a-f]|ed[89][0-9a-f][89ab][0-9a-f]'
                    || '|f0[9ab][0-9a-f][89ab][0-9a-f][89ab][0-9a-f]|f[1-3][89ab][0-9a-f][89ab][0-9a-f][89ab][0-9a-f]'
                    || '|f48[0-9a-f][89ab][0-9a-f][89ab][0-9a-f])*$')
            $fn$;
            """#,
            // The argument of the head at p (a length, a count, a value, a tag number), as numeric (it may pass 2^63).
            #"""
            CREATE FUNCTION kvsync_cbor_arg(v bytea, p int) RETURNS numeric
            LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT AS $fn$
            DECLARE
                info int := get_byte(v, p) & 31; a numeric := 0; i int;
            BEGIN
                IF info < 24 OR info > 27 THEN RETURN CASE WHEN info < 24 THEN info ELSE 0 END; END IF;
                FOR i IN 1 .. (1 << (info - 24)) LOOP a := a * 256 + get_byte(v, p + i); END LOOP;
                RETURN a;
            END
            $fn$;
            """#,
            // The size of a head whose additional information is info.
            #"""
            CREATE FUNCTION kvsync_cbor_head_size(info int) RETURNS int
            LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $fn$
                SELECT CASE WHEN info < 24 OR info = 31 THEN 1 ELSE 1 + (1 << (info - 24)) END
            $fn$;
            """#,
            // The bytes of the byte (major 2) or text (3) string at p, chunks joined, and the offset after it;
            // b is NULL when the string is not one of that major type or is malformed (a bad chunk, no break,
            // past the end).
            #"""
            CREATE FUNCTION kvsync_cbor_string(v bytea, p int, major int, OUT b bytea, OUT next int)
            LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT AS $fn$
            DECLARE
                n int := length(v); ib int; info int; len numeric; parts bytea[] := '{}';
            BEGIN
                IF p >= n THEN RETURN; END IF;
                ib := get_byte(v, p); info := ib & 31;
                IF (ib >> 5) <> major OR (info > 27 AND info < 31) THEN RETURN; END IF;
                IF info <> 31 THEN
                    IF p + kvsync_cbor_head_size(info) > n THEN RETURN; END IF;
                    len := kvsync_cbor_arg(v, p); p := p + kvsync_cbor_head_size(info);
                    IF len > n - p THEN RETURN; END IF;
                    b := substring(v FROM p + 1 FOR len::int); next := p + len::int;
                    IF major = 3 AND NOT kvsync_cbor_utf8(b) THEN b := NULL; END IF;
                    RETURN;
                END IF;
                p := p + 1;
                LOOP
                    IF p >= n THEN RETURN; END IF;
                    ib := get_byte(v, p);
                    EXIT WHEN ib = 255;
                    info := ib & 31;
                    IF (ib >> 5) <> major OR info > 27 OR p + kvsync_cbor_head_size(info) > n THEN RETURN; END IF;
                    len := kvsync_cbor_arg(v, p); p := p + kvsync_cbor_head_size(info);
                    IF len > n - p THEN RETURN; END IF;
                    IF major = 3 AND NOT kvsync_cbor_utf8(substring(v FROM p + 1 FOR len::int)) THEN RETURN; END IF;
                    parts := parts || substring(v FROM p + 1 FOR len::int); p := p + len::int;
                END LOOP;
                b := coalesce((SELECT string_agg(c, ''::bytea ORDER BY i) FROM unnest(parts) WITH ORDINALITY u(c, i)), ''::bytea);
                next := p + 1;
            END
            $fn$;
            """#,
            // The special tags' content (1, 1262698545: a date; 37: a UUID; 4: a decimal fraction), given the
            // well-formed content's bytes [p, q): the JSON text, or NULL when the content is not one.
            #"""
            CREATE FUNCTION kvsync_cbor_special(v bytea, tag bigint, p int, q int) RETURNS text
            LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT SET extra_float_digits = 1 AS $fn$
            DECLARE
                ib int; major int; info int; a numeric; x float8; s numeric; t text; bs bytea; i int;
                e numeric; m numeric; neg boolean; k int;
            BEGIN
                -- Reads heads: (major, info, a) and moves p past the head.
                IF tag = 4 THEN
                    ib := get_byte(v, p); info := ib & 31;
                    IF (ib >> 5) <> 4 OR (info <> 31 AND kvsync_cbor_arg(v, p) <> 2) THEN RETURN NULL; END IF;   -- [e, m] or [_ e, m]
                    p := p + kvsync_cbor_head_size(info);
                    ib := get_byte(v, p); major := ib >> 5; info := ib & 31;
                    IF major > 1 THEN RETURN NULL; END IF;
                    a := kvsync_cbor_arg(v, p); p := p + kvsync_cbor_head_size(info);
                    e := CASE WHEN major = 0 THEN least(a, 9223372036854775807) ELSE -1 - least(a, 9223372036854775807) END;
                    ib := get_byte(v, p); major := ib >> 5; info := ib & 31;
                    IF major <= 1 THEN
                        a := kvsync_cbor_arg(v, p); p := p + kvsync_cbor_head_size(info);
                        neg := major = 1; m := CASE WHEN neg THEN a + 1 ELSE a END;
                    ELSIF major = 6 AND info <> 31 AND kvsync_cbor_arg(v, p) IN (2, 3) THEN
                        neg := kvsync_cbor_arg(v, p) = 3; p := p + kvsync_cbor_head_size(info);
                        SELECT r.b, r.next INTO bs, p FROM kvsync_cbor_string(v, p, 2) r;
                        IF bs IS NULL THEN RETURN NULL; END IF;
                        bs := ltrim(bs, '\x00'::bytea);
                        IF length(bs) > 16 THEN RETURN NULL; END IF;
                        m := 0;
                        FOR i IN 0 .. length(bs) - 1 LOOP m := m * 256 + get_byte(bs, i); END LOOP;
                        IF neg THEN m := m + 1; END IF;
                        IF m > 340282366920938463463374607431768211455 THEN RETURN NULL; END IF;
                    ELSE
                        RETURN NULL;
                    END IF;
                    IF info = 31 AND get_byte(v, p) <> 255 THEN RETURN NULL; END IF;
                    IF m = 0 THEN RETURN '0'; END IF;
                    IF e > 127 THEN
                        IF e - 127 > 40 OR m * 10 ^ (e - 127) > 340282366920938463463374607431768211455 THEN RETURN NULL; END IF;
                    ELSIF e < -128 THEN
                        IF -128 - e > 40 OR mod(m, 10 ^ (-128 - e)) <> 0 THEN RETURN NULL; END IF;
                    END IF;
                    s := trim_scale((m::text || 'e' || e::text)::numeric);
                    RETURN CASE WHEN neg THEN '-' ELSE '' END || s::text;
                END IF;
                -- Tags 1, 1262698545 and 37 look through any tags on their content.
                LOOP
                    ib := get_byte(v, p); major := ib >> 5; info := ib & 31;
                    EXIT WHEN major <> 6;
                    p := p + kvsync_cbor_head_size(info);
                END LOOP;
                IF tag = 37 THEN
                    IF major = 2 THEN
                        bs := (kvsync_cbor_string(v, p, 2)).b;
                        IF length(bs) <> 16 THEN RETURN NULL; END IF;
                        t := upper(encode(bs, 'hex'));
                        RETURN '"' || substr(t, 1, 8) || '-' || substr(t, 9, 4) || '-' || substr(t, 13, 4) || '-' || substr(t, 17, 4) || '-' || substr(t, 21) || '"';
                    ELSIF major = 3 THEN
                        bs := (kvsync_cbor_string(v, p, 3)).b;
                        IF length(bs) <> 36 THEN RETURN NULL; END IF;
                        t := convert_from(bs, 'UTF8');
                        IF t !~ '^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$' THEN RETURN NULL; END IF;
                        RETURN '"' || upper(t) || '"';
                    END IF;
                    RETURN NULL;
                END IF;
                -- A date: seconds since 1970 (tag 1) or since 2001 (the reference-date tag), integer or float.
                IF major <= 1 THEN
                    a := kvsync_cbor_arg(v, p);
                    s := CASE WHEN major = 0 THEN a ELSE -1 - a END;
                ELSIF major = 7 AND info BETWEEN 25 AND 27 THEN
                    x := kvsync_cbor_float(v, p + 1, info);
                    IF x IS NULL THEN RETURN NULL; END IF;
                    s := x::text::numeric;
                ELSE
                    RETURN NULL;
                END IF;
                IF tag <> 1 THEN s := s + 978307200; END IF;
                RETURN kvsync_cbor_date_text(s);
            END
            $fn$;
            """#,
            // The value that stands for bytes that are not one well-formed CBOR item: the hex of at most their
            // first 32 bytes.
            #"""
            CREATE FUNCTION kvsync_cbor_invalid(v bytea) RETURNS jsonb
            LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $fn$
                SELECT jsonb_build_object('$invalid', encode(substring(v FROM 1 FOR 32), 'hex'))
            $fn$;
            """#,
            // The float64 bits (hex) that a NaN or infinite float16/32/64 whose bits start at p has once widened
            // to a float64, as Swift widens it: what makes two map keys equal.
            #"""
            CREATE FUNCTION kvsync_cbor_nonfinite(v bytea, p int, info int) RETURNS text
            LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT AS $fn$
            DECLARE
                s text := CASE WHEN get_byte(v, p) >= 128 THEN 'f' ELSE '7' END;
                f bigint;
            BEGIN
                IF info = 27 THEN RETURN encode(set_byte(substring(v FROM p + 1 FOR 8), 0, get_byte(v, p) & 127), 'hex') || s; END IF;
                IF info = 25 THEN
                    f := ((get_byte(v, p) & 3) << 8) | get_byte(v, p + 1);
                    RETURN CASE WHEN f = 0 THEN 'ff0000000000000' ELSE 'ff8000000000000' END || s;
                END IF;
                f := ((get_byte(v, p + 1) & 127)::bigint << 16) | (get_byte(v, p + 2) << 8) | get_byte(v, p + 3);
                IF f = 0 THEN RETURN 'ff0000000000000' || s; END IF;
                RETURN lpad(to_hex(((f | 4194304) << 29) | (2047::bigint << 52)), 16, '0') || s;
            END
            $fn$;
            """#,
            #"""
            CREATE FUNCTION kvsync_cbor_to_jsonb(v bytea) RETURNS jsonb
            LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT SET extra_float_digits = 1 SET search_path FROM CURRENT AS $fn$
            DECLARE
                n int := length(v);
                p int := 0;
                o text[] := '{}';      -- the JSON text, in pieces
                no int := 0;
                ids text[] := '{}';    -- the identity of the map key being read (CBOR equality), in pieces
                ni int := 0;
                kd int := 0;           -- map keys open around the item being read
                keys text[] := '{}';   -- the identities of the keys of the open maps
                nk int := 0;
                -- The open arrays, maps and tags, innermost at d: kind (4, 5, 6), items still to come (-1:
                -- indefinite), items begun, bytes' text for the items (0 base64url, 1 base64, 2 base16), and
                -- for a tag its number (-1 for one with no meaning here), first piece and content's offset; for a
                -- map, where its keys' identities start, the current key's first piece and identity piece, and
                -- whether it is text.
                sk int[] := '{}'; sl bigint[] := '{}'; sc bigint[] := '{}'; sm int[] := '{}';
                st bigint[] := '{}'; so int[] := '{}'; sp int[] := '{}'; sb int[] := '{}'; si int[] := '{}';
                stx boolean[] := '{}';
                d int := 0;
                started boolean := false;
                done boolean;
                ib int; major int; info int; a bigint; an numeric; big boolean; hi bigint; lo bigint;
                mode int; t text; bs bytea; x float8; r record; iskey boolean; tag bigint; piece text; idp text;
            BEGIN
                IF n > 16777216 THEN RETURN kvsync_cbor_invalid(v); END IF;   -- CBORLimits.default.maxInputSize
                LOOP
                    done := false;
                    IF d > 0 AND (sl[d] = 0 OR (sl[d] < 0 AND p < n AND get_byte(v, p) = 255)) THEN
                        -- The innermost container ends.
                        IF sl[d] < 0 THEN
                            IF sk[d] = 5 AND sc[d] % 2 = 1 THEN RETURN kvsync_cbor_invalid(v); END IF;
                            p := p + 1;
                        END IF;
                        IF sk[d] = 4 THEN
                            no := no + 1; o[no] := ']';
                            IF kd > 0 THEN ni := ni + 1; ids[ni] := ']'; END IF;
                        ELSIF sk[d] = 5 THEN
                            IF nk - sb[d] > 1 AND (SELECT count(DISTINCT k) FROM unnest(keys[sb[d] + 1 : nk]) k) < nk - sb[d] THEN
                                RETURN kvsync_cbor_invalid(v);
                            END IF;
                            nk := sb[d];
                            no := no + 1; o[no] := '}';
                            IF kd > 0 THEN ni := ni + 1; ids[ni] := '}'; END IF;
                        ELSE
                            IF st[d] >= 0 THEN
                                piece := kvsync_cbor_special(v, st[d], sp[d], p);
                                IF piece IS NOT NULL THEN no := so[d]; no := no + 1; o[no] := piece; END IF;
                            END IF;
                            IF kd > 0 THEN ni := ni + 1; ids[ni] := ')'; END IF;
                        END IF;
                        d := d - 1;
                        done := true;
                    ELSE
                        IF d = 0 THEN
                            EXIT WHEN started;
                            started := true;
                            mode := 0; iskey := false;
                        ELSE
                            IF sl[d] < 0 AND p >= n THEN RETURN kvsync_cbor_invalid(v); END IF;
                            IF sl[d] > 0 THEN sl[d] := sl[d] - 1; END IF;
                            sc[d] := sc[d] + 1;
                            mode := sm[d];
                            iskey := sk[d] = 5 AND sc[d] % 2 = 1;
                            IF sk[d] <> 6 AND sc[d] > 1 AND (sk[d] = 4 OR iskey) THEN no := no + 1; o[no] := ','; END IF;
                            IF iskey THEN
                                mode := 0;
                                so[d] := no; si[d] := ni; kd := kd + 1;
                            END IF;
                        END IF;
                        IF p >= n THEN RETURN kvsync_cbor_invalid(v); END IF;
                        ib := get_byte(v, p); major := ib >> 5; info := ib & 31; big := false;
                        IF iskey THEN stx[d] := major = 3; END IF;
                        IF info < 24 THEN
                            a := info; p := p + 1;
                        ELSIF info = 24 THEN
                            IF p + 2 > n THEN RETURN kvsync_cbor_invalid(v); END IF;
                            a := get_byte(v, p + 1); p := p + 2;
                        ELSIF info = 25 THEN
                            IF p + 3 > n THEN RETURN kvsync_cbor_invalid(v); END IF;
                            a := (get_byte(v, p + 1) << 8) | get_byte(v, p + 2); p := p + 3;
                        ELSIF info = 26 THEN
                            IF p + 5 > n THEN RETURN kvsync_cbor_invalid(v); END IF;
                            a := (get_byte(v, p + 1)::bigint << 24) | (get_byte(v, p + 2) << 16) | (get_byte(v, p + 3) << 8) | get_byte(v, p + 4);
                            p := p + 5;
                        ELSIF info = 27 THEN
                            IF p + 9 > n THEN RETURN kvsync_cbor_invalid(v); END IF;
                            hi := (get_byte(v, p + 1)::bigint << 24) | (get_byte(v, p + 2) << 16) | (get_byte(v, p + 3) << 8) | get_byte(v, p + 4);
                            lo := (get_byte(v, p + 5)::bigint << 24) | (get_byte(v, p + 6) << 16) | (get_byte(v, p + 7) << 8) | get_byte(v, p + 8);
                            IF hi < 2147483648 THEN a := (hi << 32) | lo; ELSE big := true; an := hi::numeric * 4294967296 + lo; a := -1; END IF;
                            p := p + 9;
                        ELSIF info = 31 AND major IN (2, 3, 4, 5) THEN
                            a := -1; p := p + 1;
                        ELSE
                            RETURN kvsync_cbor_invalid(v);   -- reserved 28-30, an indefinite integer or tag, a break out of place
                        END IF;
                        IF major = 0 OR major = 1 THEN
                            t := CASE WHEN big THEN an::text ELSE a::text END;
                            IF major = 1 THEN t := (-1 - t::numeric)::text; END IF;
                            no := no + 1; o[no] := t;
                            IF kd > 0 THEN ni := ni + 1; ids[ni] := 'i' || t || ';'; END IF;
                            done := true;
                        ELSIF major = 2 OR major = 3 THEN
                            IF a >= 0 OR big THEN
                                IF big OR a > n - p THEN RETURN kvsync_cbor_invalid(v); END IF;
                                bs := substring(v FROM p + 1 FOR a::int); p := p + a::int;
                                IF major = 3 AND NOT kvsync_cbor_utf8(bs) THEN RETURN kvsync_cbor_invalid(v); END IF;
                            ELSE
                                r := kvsync_cbor_string(v, p - 1, major);
                                IF r.b IS NULL THEN RETURN kvsync_cbor_invalid(v); END IF;
                                bs := r.b; p := r.next;
                            END IF;
                            IF major = 3 THEN
                                t := convert_from(bs, 'UTF8');
                                no := no + 1; o[no] := kvsync_cbor_json_string(t);
                                IF kd > 0 THEN
                                    t := CASE WHEN t ~ '^[\x01-\x7f]*$' THEN t ELSE normalize(t, NFC) END;
                                    ni := ni + 1; ids[ni] := 's' || length(t) || ':' || t;
                                END IF;
                            ELSE
                                no := no + 1;
                                o[no] := '"' || CASE mode
                                    WHEN 0 THEN rtrim(translate(replace(encode(bs, 'base64'), E'\n', ''), '+/', '-_'), '=')
                                    WHEN 1 THEN replace(encode(bs, 'base64'), E'\n', '')
                                    ELSE upper(encode(bs, 'hex')) END || '"';
                                IF kd > 0 THEN ni := ni + 1; ids[ni] := 'b' || encode(bs, 'hex') || ';'; END IF;
                            END IF;
                            done := true;
                        ELSIF major = 4 OR major = 5 OR major = 6 THEN
                            IF d >= 64 THEN RETURN kvsync_cbor_invalid(v); END IF;
                            IF major <> 6 AND (big OR a > (n - p) / (major - 3)) THEN RETURN kvsync_cbor_invalid(v); END IF;
                            tag := CASE WHEN big THEN -1 ELSE a END;
                            IF major = 6 AND tag IN (2, 3) AND p < n AND (get_byte(v, p) >> 5) = 2 THEN
                                -- A bignum: the base64url of its magnitude, '~' before a negative one.
                                r := kvsync_cbor_string(v, p, 2);
                                IF r.b IS NULL THEN RETURN kvsync_cbor_invalid(v); END IF;
                                p := r.next;
                                no := no + 1;
                                o[no] := '"' || CASE WHEN tag = 3 THEN '~' ELSE '' END
                                    || rtrim(translate(replace(encode(r.b, 'base64'), E'\n', ''), '+/', '-_'), '=') || '"';
                                IF kd > 0 THEN ni := ni + 1; ids[ni] := 'g' || tag || '(b' || encode(r.b, 'hex') || ';)'; END IF;
                                done := true;
                            ELSE
                                d := d + 1;
                                sk[d] := major; sc[d] := 0; sm[d] := mode;
                                sl[d] := CASE WHEN major = 6 THEN 1 WHEN a < 0 THEN -1 ELSE a * (major - 3) END;
                                IF major = 4 THEN
                                    no := no + 1; o[no] := '[';
                                    IF kd > 0 THEN ni := ni + 1; ids[ni] := '['; END IF;
                                ELSIF major = 5 THEN
                                    no := no + 1; o[no] := '{'; sb[d] := nk;
                                    IF kd > 0 THEN ni := ni + 1; ids[ni] := '{'; END IF;
                                ELSE
                                    IF tag IN (21, 22, 23) THEN sm[d] := tag - 21; END IF;
                                    st[d] := CASE WHEN tag IN (1, 4, 37, 1262698545) THEN tag ELSE -1 END;
                                    so[d] := no; sp[d] := p;
                                    IF kd > 0 THEN ni := ni + 1; ids[ni] := 'g' || CASE WHEN big THEN an::text ELSE a::text END || '('; END IF;
                                END IF;
                            END IF;
                        ELSE
                            -- Major type 7: simple values and floats.
                            IF info = 24 AND a < 32 THEN RETURN kvsync_cbor_invalid(v); END IF;
                            IF info >= 25 THEN
                                x := kvsync_cbor_float(v, p - (1 << (info - 24)), info);
                                no := no + 1;
                                o[no] := CASE WHEN x IS NULL THEN 'null' ELSE kvsync_cbor_float_text(x, (get_byte(v, p - (1 << (info - 24))) >> 7) = 1) END;
                                IF kd > 0 THEN
                                    ni := ni + 1;
                                    ids[ni] := 'f' || coalesce(CASE WHEN x = 0 AND (get_byte(v, p - (1 << (info - 24))) >> 7) = 1 THEN '-0' ELSE x::text END,
                                                               kvsync_cbor_nonfinite(v, p - (1 << (info - 24)), info)) || ';';
                                END IF;
                            ELSE
                                no := no + 1;
                                o[no] := CASE a WHEN 20 THEN 'false' WHEN 21 THEN 'true' ELSE 'null' END;
                                IF kd > 0 THEN ni := ni + 1; ids[ni] := 'y' || a || ';'; END IF;
                            END IF;
                            done := true;
                        END IF;
                    END IF;
                    -- A map's key just ended: its name, and its identity among the map's keys.
                    IF done AND d > 0 AND sk[d] = 5 AND sc[d] % 2 = 1 THEN
                        IF NOT stx[d] THEN
                            piece := array_to_string(o[so[d] + 1 : no], '');
                            no := so[d] + 1; o[no] := kvsync_cbor_json_string(piece);
                        END IF;
                        no := no + 1; o[no] := ':';
                        nk := nk + 1; keys[nk] := array_to_string(ids[si[d] + 1 : ni], '');
                        kd := kd - 1;
                        IF kd = 0 THEN ni := 0; END IF;
                    END IF;
                END LOOP;
                IF p <> n THEN RETURN kvsync_cbor_invalid(v); END IF;
                RETURN array_to_string(o[1 : no], '')::jsonb;
            END
            $fn$;
            """#,
            // A CBOR head: major type and argument, in its shortest form.
            #"""
            CREATE FUNCTION kvsync_cbor_head(major int, a numeric) RETURNS bytea
            LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT AS $fn$
            DECLARE
                size int; info int; b bytea; i int;
            BEGIN
                IF a < 24 THEN RETURN set_byte('\x00'::bytea, 0, major * 32 + a::int); END IF;
                size := CASE WHEN a < 256 THEN 1 WHEN a < 65536 THEN 2 WHEN a < 4294967296 THEN 4 ELSE 8 END;
                info := CASE size WHEN 1 THEN 24 WHEN 2 THEN 25 WHEN 4 THEN 26 ELSE 27 END;
                b := set_byte(substring('\x000000000000000000'::bytea FROM 1 FOR size + 1), 0, major * 32 + info);
                FOR i IN REVERSE size .. 1 LOOP
                    b := set_byte(b, i, mod(a, 256)::int);
                    a := div(a, 256);
                END LOOP;
                RETURN b;
            END
            $fn$;
            """#,
            // jsonb as deterministic CBOR (RFC 8949 section 4.2.1), at a nesting depth.
            #"""
            CREATE FUNCTION kvsync_jsonb_to_cbor_at(j jsonb, depth int) RETURNS bytea
            LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE STRICT AS $fn$
            DECLARE
                t text := jsonb_typeof(j); b bytea; x numeric; f float8;
            BEGIN
                CASE t
                WHEN 'null' THEN RETURN '\xf6'::bytea;
                WHEN 'boolean' THEN RETURN CASE WHEN j = 'true'::jsonb THEN '\xf5'::bytea ELSE '\xf4'::bytea END;
                WHEN 'string' THEN
                    b := convert_to(j #>> '{}', 'UTF8');
                    RETURN kvsync_cbor_head(3, length(b)) || b;
                WHEN 'number' THEN
                    x := (j #>> '{}')::numeric;
                    IF scale(x) = 0 AND x BETWEEN -9223372036854775808 AND 18446744073709551615 THEN
                        RETURN CASE WHEN x < 0 THEN kvsync_cbor_head(1, -1 - x) ELSE kvsync_cbor_head(0, x) END;
                    END IF;
                    IF abs(x) > 1.7976931348623157e308 THEN
                        RAISE EXCEPTION 'kvsync_jsonb_to_cbor: the number % is beyond a float64''s range', left(x::text, 40)
                            USING ERRCODE = 'numeric_value_out_of_range';
                    END IF;
                    f := CASE WHEN abs(x) < 2.4703282292062328e-324 THEN 0 ELSE x::float8 END;
                    RETURN '\xfb'::bytea || float8send(f);
                WHEN 'array' THEN
                    IF depth >= 64 THEN
                        RAISE EXCEPTION 'kvsync_jsonb_to_cbor: the value nests deeper than 64 arrays and objects, which devices refuse'
                            USING ERRCODE = 'program_limit_exceeded';
                    END IF;
                    RETURN kvsync_cbor_head(4, jsonb_array_length(j)) || coalesce(
                        (SELECT string_agg(kvsync_jsonb_to_cbor_at(e, depth + 1), ''::bytea ORDER BY i)
                         FROM jsonb_array_elements(j) WITH ORDINALITY a(e, i)), ''::bytea);
                ELSE
                    IF depth >= 64 THEN
                        RAISE EXCEPTION 'kvsync_jsonb_to_cbor: the value nests deeper than 64 arrays and objects, which devices refuse'
                            USING ERRCODE = 'program_limit_exceeded';
                    END IF;
                    RETURN kvsync_cbor_head(5, (SELECT count(*) FROM jsonb_object_keys(j))) || coalesce(
                        (SELECT string_agg(k || kvsync_jsonb_to_cbor_at(e, depth + 1), ''::bytea ORDER BY k)
                         FROM (SELECT kvsync_cbor_head(3, octet_length(key)) || convert_to(key, 'UTF8') AS k, value AS e
                               FROM jsonb_each(j)) m), ''::bytea);
                END CASE;
            END
            $fn$;
            """#,
            // jsonb as deterministic CBOR: what Swift's CBOREncoder writes for the same value held as
            // dictionaries, arrays, Int64/UInt64, Double, String, Bool and nil.
            #"""
            CREATE FUNCTION kvsync_jsonb_to_cbor(j jsonb) RETURNS bytea
            LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT SET search_path FROM CURRENT AS $fn$
                SELECT kvsync_jsonb_to_cbor_at(j, 0)
            $fn$;
            """#,
            "GRANT EXECUTE ON FUNCTION kvsync_cbor_to_jsonb(bytea) TO PUBLIC",
            "GRANT EXECUTE ON FUNCTION kvsync_jsonb_to_cbor(jsonb) TO PUBLIC",
        ]
    }
}
#endif
