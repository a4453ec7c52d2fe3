#!/usr/bin/env python3
"""Writes the hand-made seed inputs of the fuzz targets into DIR/<target>/ (default
.build-fuzz-libfuzzer/seeds). `scripts/fuzz.sh merge` folds them into fuzz/corpus/ with what the
fuzzer found; see fuzz/README.md. The input layouts are those of fuzz/Properties/*.swift: for `keys`
and `paths` the first byte selects the check."""
import hashlib
import os
import struct
import sys

# --- a small CBOR writer, so that odd forms (float16, indefinite lengths, bignums) are explicit ---


def head(major, n):
    if n < 24:
        return bytes([major << 5 | n])
    for info, fmt in ((24, ">B"), (25, ">H"), (26, ">I"), (27, ">Q")):
        if n < 1 << (8 * struct.calcsize(fmt)):
            return bytes([major << 5 | info]) + struct.pack(fmt, n)
    raise ValueError(n)


class Tag:
    def __init__(self, tag, value):
        self.tag, self.value = tag, value


class Raw:
    def __init__(self, data):
        self.data = data


def cbor(v):
    if isinstance(v, Raw):
        return v.data
    if v is True:
        return b"\xf5"
    if v is False:
        return b"\xf4"
    if v is None:
        return b"\xf6"
    if isinstance(v, int):
        return head(0, v) if v >= 0 else head(1, -1 - v)
    if isinstance(v, float):
        return b"\xfb" + struct.pack(">d", v)
    if isinstance(v, bytes):
        return head(2, len(v)) + v
    if isinstance(v, str):
        b = v.encode()
        return head(3, len(b)) + b
    if isinstance(v, list):
        return head(4, len(v)) + b"".join(cbor(x) for x in v)
    if isinstance(v, dict):
        return head(5, len(v)) + b"".join(cbor(k) + cbor(x) for k, x in v.items())
    if isinstance(v, Tag):
        return head(6, v.tag) + cbor(v.value)
    raise TypeError(v)


UUID = bytes.fromhex("6f9619ff8b86d011b42d00c04fc964ff")
MEMO = "今日は集中できた。明日は早起きして振り返りを行う。"


def cbor_seeds():
    subscription = {
        "id": Tag(37, UUID), "name": "Music", "price": Tag(4, [-2, 1200]), "currency": "JPY",
        "startedAt": Tag(1, 1763769600.0), "renewsOn": "2026-11-21", "active": True,
        "tags": ["music", "family"], "website": Tag(32, "https://example.com/plan?x=1"),
        "notes": {"plan": "family"},
    }
    record = {
        "day": "2026-11-21",
        "scores": {f"{c}.{k}": 1 + (k % 5) for c in ("perceive", "think") for k in range(1, 4)},
        "memos": {"perceive": MEMO * 2},
        "cachedCategoryAverages": {"perceive": 2.5, "think": 3.0},
        "cachedTotalAverage": 2.75, "cachedInputCount": 6, "updatedAt": Tag(1, 1763769600.5),
    }
    scalars = {
        "i": -5, "i8": 127, "i16": -32768, "i32": 2147483647, "i64": -(1 << 63), "u": 1 << 40,
        "u8": 255, "u16": 65535, "u32": 1 << 31, "u64": (1 << 64) - 1,
        "f": Raw(b"\xfa\x3f\xc0\x00\x00"), "d": Raw(b"\xf9\x3c\x00"), "b": False, "data": b"\x00\xff",
        "s": None,
    }
    seeds = {
        "subscription": cbor(subscription),
        "subscription-date-string": cbor(dict(subscription, startedAt=Tag(0, "2024-03-01T12:30:15.250000+09:00"))),
        "subscription-bignum-price": cbor(dict(subscription, price=Tag(4, [-30, Tag(2, b"\x01" + b"\x00" * 15)]))),
        "subscription-reference-date": cbor(dict(subscription, startedAt=Tag(1262698545, 1.0e9 + 0.123))),
        "record": cbor(record),
        "record-day-number": cbor(dict(record, day=20413)),
        "scalars": cbor(scalars),
        "shape-circle": cbor({"circle": {"radius": 1.5}}),
        "shape-rect": cbor({"rect": {"width": 2.0, "height": Raw(b"\xf9\x7c\x00")}}),
        "shape-point": cbor({"point": {}}),
        "shape-labelled": cbor({"labelled": {"_0": "x", "_1": [1, -2, 127]}}),
        "tree": cbor({"node": {"_0": [{"leaf": {"_0": 3}}, {"node": {"_0": []}}]}}),
        "ints": cbor([0, 1, -1, 23, 24, 255, 256, (1 << 63) - 1, -(1 << 63)]),
        "ints-indefinite": b"\x9f\x01\x02\xff",
        "doubles-map": cbor({"a": [1.5, float("inf"), -0.0], "b": []}),
        "int-keys": cbor({1: "x", -3: "y"}),
        "uuids": cbor([Tag(37, UUID), UUID, "6F9619FF-8B86-D011-B42D-00C04FC964FF"]),
        "decimal-float": cbor(0.1),
        "decimal-fraction-huge-exponent": cbor(Tag(4, [200, 5])),
        "decimal-nan": Raw(b"\xf9\x7e\x00").data,
        "bignum-negative": cbor(Tag(3, b"\x01\x00")),
        "urls": cbor([Tag(32, "https://example.com/a b"), None, "file:///tmp/x"]),
        "self-described": cbor(Tag(55799, [1, 2])),
        "indefinite-text": b"\x7f\x62ab\x61c\xff",
        "indefinite-map": b"\xbf\x61a\x01\xff",
        "float16-specials": b"\x84\xf9\x7c\x00\xf9\xfc\x00\xf9\x7e\x00\xf9\x00\x01",
        "simple-values": b"\x85\xf0\xf7\xf8\x20\xf8\xff\xf6",
        "nested-64": b"\x81" * 63 + b"\x80",
        "nested-65": b"\x81" * 64 + b"\x80",
        "tags-nested": b"\xc1" * 70 + b"\x00",
        "duplicate-key-map": b"\xa2\x61a\x01\x61a\x02",
        "duplicate-key-nfc": b"\xa2\x62\xc3\xa9\x01\x63e\xcc\x81\x02",
        "invalid-utf8": b"\x62\xc3\x28",
        "truncated-string": b"\x78\x28ab",
        "huge-array-count": b"\x9b\xff\xff\xff\xff\xff\xff\xff\xff",
        "trailing-bytes": b"\x01\x02",
        "stray-break": b"\xff",
        "reserved-info": b"\x1c",
        "date-tag0-bad": cbor(Tag(0, "2026-02-30T00:00:00Z")),
        "date-tag1-nan": cbor(Tag(1, float("nan"))),
    }
    return seeds


# --- keys: selector byte (encoding index * 4 for render, type * 4 + 2 for order, 3 for text) ---


def i64(v):
    return struct.pack(">Q", (v & 0xFFFFFFFFFFFFFFFF) ^ (1 << 63))


def i32(v):
    return struct.pack(">I", (v & 0xFFFFFFFF) ^ (1 << 31))


def date_key(seconds_since_2001):
    bits = struct.unpack(">Q", struct.pack(">d", seconds_since_2001))[0]
    ordered = bits ^ (1 << 63) if bits >> 63 == 0 else bits ^ 0xFFFFFFFFFFFFFFFF
    return struct.pack(">Q", ordered)


def var(b):
    """A non-terminal variable-length component."""
    return b.replace(b"\x00", b"\x00\x01") + b"\x00\x00"


DAY = 20413  # 2025-11-22 + 364 = 2026-11-21


def key_seeds():
    enc = {  # encoding index in KeyProperty.encodings -> sample keys
        0: [i64(0), i64(-1), i64(-(1 << 63)), i64((1 << 63) - 1)],
        1: [i32(42), i32(-(1 << 31))],
        2: [struct.pack(">Q", (1 << 64) - 1)],
        3: [struct.pack(">I", 7)],
        4: ["trainer".encode(), "é".encode(), "e\u0301".encode(), "推乃 愛".encode(), b"\xc3\x28", b""],
        5: [UUID, UUID[:15]],
        6: [i32(DAY), i32(0), i32(-1), i32(2932896), i32(-719529), i32((1 << 31) - 1), i32(-(1 << 31))],
        7: [date_key(0.0), date_key(-0.0), date_key(1e9 + 0.5), date_key(-1e12), date_key(1e300),
            date_key(float("nan")), date_key(float("inf"))],
        8: [b"\x00\x01\xff", b""],
        9: [var(b"sub") + i64(5), var(b"a\x00b") + i64(-2), b"abc\x00\x02" + i64(1)],
        10: [UUID + date_key(7.5)],
        11: [var(b"\x00") + var("x".encode()) + i32(DAY)],
        12: [i32(DAY) + struct.pack(">I", 9)],
        13: [i32(-3) + var(b"\xff") + "名前".encode()],
        14: [var(b"k") + i32(DAY) + struct.pack(">Q", 12)],
    }
    seeds = {}
    for index, keys in enc.items():
        for n, key in enumerate(keys):
            seeds[f"render-{index}-{n}"] = bytes([index * 4]) + key
    pairs = {  # type index in KeyProperty.order -> (a, b)
        0: (i64(-1), i64(1)), 1: (i32(5), i32(-5)), 2: (struct.pack(">Q", 1), struct.pack(">Q", 2)),
        3: (struct.pack(">I", 3), struct.pack(">I", 3)),
        4: ("é".encode(), "e\u0301".encode()), 5: (UUID, bytes(16)), 6: (i32(DAY), i32(DAY + 1)),
        7: (date_key(0.0), date_key(-0.0)), 8: (b"a", b"a\x00"),
        9: (var(b"a") + i64(2), var(b"a\x00") + i64(1)), 10: (var(b"x") + b"y", var(b"x") + b"z"),
        11: (UUID + date_key(1.0), UUID + date_key(-1.0)),
        12: (i32(DAY) + var(b"m") + struct.pack(">I", 1), i32(DAY) + var(b"") + struct.pack(">I", 2)),
        13: (var(b"p") + i32(1) + b"q", var(b"p") + i32(-1) + b"q"),
    }
    for index, (a, b) in pairs.items():
        seeds[f"order-{index}"] = bytes([index * 4 + 2, len(a)]) + a + b
    for n, text in enumerate(["int64", "tuple(string,int64)", "tuple(uuid,tuple(day,date),bytes)",
                              "tuple(" * 20 + "int32" + ",int32)" * 20, "tuple(int64)", "strin"]):
        seeds[f"encoding-{n}"] = b"\x03" + text.encode()
    return seeds


# --- paths: selector 0 group identifier, 1 relative path, 2 container root ---


def path_seeds():
    groups = [
        "group.com.example.app", "group.com.yourcompany.VirtualTrainer", "group.a-b.c1", "../etc",
        "group.", "group.com", "group..com.x", "group.com./x", "group.com.exa mple", "group.com.ex\0ample",
        "group.com." + "a" * 64, "group." + ".".join(["abcdefgh"] * 28), "group．com．example",
        "group.com.ex\u2215ample", "group.com.-x", "group.com.x-", "GROUP.com.x", "group.com\\x.y",
        "group.com.\u0435xample",
    ]
    paths = [
        "TrainerImages/6F9619FF-8B86-D011-B42D-00C04FC964FF.png", "a", "../etc/passwd", "a/../b", "a/./b",
        "a//b", "a/", "/etc/passwd", "a\\b", "a\0b", "．．/x", "a\uff0fb", "a\u2215b", "\u2024\u2024",
        "\u2025", ".kvtmp-0123", "x/.kvtmp-y", "\uff0ekvtmp-x", "a" * 255, "a" * 256,
        "/".join(["abcdefg"] * 128), "tab\there", "del\x7f", "caf\u00e9/ok", "a\u0338b",
        # A slash followed by a combining mark is one Swift Character but still a slash to the kernel.
        "/\u0301etc/passwd", "link/\u0301x", "a//\u0301", ".kvtmp-\u0301x", "a/\u0301b",
    ]
    roots = ["tmp/kvstore", "a/../b", "a/./b//c", "../../..", "home/user/.local/share/kvstore/", "a\0b",
             "a/\u0301/../b"]
    seeds = {}
    for n, text in enumerate(groups):
        seeds[f"group-{n}"] = b"\x00" + text.encode()
    for n, text in enumerate(paths):
        seeds[f"path-{n}"] = b"\x01" + text.encode()
    for n, text in enumerate(roots):
        seeds[f"root-{n}"] = b"\x02" + text.encode()
    seeds["group-invalid-utf8"] = b"\x00group.com.\xff"
    seeds["path-invalid-utf8"] = b"\x01a/\xc3"
    return seeds


# --- dump: real `kvtool dump` output (fuzz/seeds/dump/, from the demo's container) and broken variants ---


def dump_seeds():
    folder = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fuzz", "seeds", "dump")
    seeds = {}
    for name in sorted(os.listdir(folder)):
        with open(os.path.join(folder, name), "rb") as f:
            seeds[name] = f.read()
    jsonl = seeds["notifications.jsonl"]
    header, _, rest = jsonl.partition(b"\n")
    seeds.update({
        "jsonl-crlf": jsonl.replace(b"\n", b"\r\n"),
        "jsonl-count-mismatch": header.replace(b'"entries":2', b'"entries":3') + b"\n" + rest,
        "jsonl-deep-value": header + b'\n{"db":"c/receivedNotifications","key":["2026-11-22T23:08:25.403Z",'
                            b'"95D0ECF1-C5FE-4C52-A99A-57E381DFADA8"],"value":' + b"[" * 200 + b"]" * 200 + b"}\n",
        "jsonl-huge-number": header.replace(b'"sourceTransactionID":36', b'"sourceTransactionID":1e999'),
        "jsonl-bad-key-encoding": header.replace(b"tuple(date,uuid)", b"tuple(" * 30 + b"int64" + b",int64)" * 30),
        "jsonl-truncated": jsonl[: len(jsonl) // 2],
        "json-empty-entries": b'{"header":' + header + b',"entries":[]}',
        "mdb-bad-hex": seeds["notifications.mdb"].replace(b"\n ", b"\n zz", 1),
        "mdb-only-version": b"VERSION=3\n",
        "csv": b"key,value\n1,2\n",
        "binary": b"\x00\x01\xff",
        "empty": b"",
    })
    return seeds

# --- live metadata: catalog entries, history records, widget feed files, snapshot manifests ---


def catalog_entry(name, kind="collection", key="int64", value="cbor", indexes=(), derived=(), derived_from=None,
                  database=None, schema=1):
    d = {"name": name, "kind": kind, "keyEncoding": key, "valueEncoding": value, "schemaVersion": schema,
         "indexes": [{"name": i, "keyEncoding": k, "database": f"i/{name}/{i}"} for i, k in indexes],
         "derived": list(derived), "database": database or (("c/" if kind == "collection" else "d/") + name)}
    if derived_from is not None:
        d["derivedFrom"] = derived_from
    return d


def catalog_seed(key, value):
    """The catalog target's layout: key length (mod 64), key, value."""
    key = key.encode() if isinstance(key, str) else key
    return bytes([len(key)]) + key + (cbor(value) if not isinstance(value, bytes) else value)


def catalog_seeds():
    records = catalog_entry("dailyRecords", key="day", value="fixed(24)", indexes=[("byMonth", "int64")],
                            derived=["dailyTotals"])
    return {
        "valid-collection": catalog_seed("c/dailyRecords", records),
        "valid-defaults": catalog_seed("d/standard", catalog_entry("standard", "defaults", "string")),
        "valid-history": catalog_seed("c/_history", catalog_entry("_history", key="int64")),
        "valid-derived": catalog_seed("c/dailyTotals", catalog_entry("dailyTotals", key="day", derived_from="dailyRecords")),
        "valid-tuple": catalog_seed("c/events", catalog_entry("events", key="tuple(date,uuid)", value="bytes")),
        "wrong-key": catalog_seed("c/other", records),
        "wrong-kind-key": catalog_seed("d/dailyRecords", records),
        "binary-key": catalog_seed(b"\xff\x00c/", records),
        "not-cbor": catalog_seed("c/x", b"\xff\xfe garbage"),
        "cbor-int": catalog_seed("c/x", 7),
        "cbor-wrong-shape": catalog_seed("c/x", {"name": 5, "kind": [], "database": None}),
        "unknown-kind": catalog_seed("c/x", dict(catalog_entry("x"), kind="table")),
        "unknown-key-encoding": catalog_seed("c/x", catalog_entry("x", key="int65")),
        "deep-key-encoding": catalog_seed("c/x", catalog_entry("x", key="tuple(" * 40 + "int64" + ")" * 40)),
        "fixed-zero": catalog_seed("c/x", catalog_entry("x", value="fixed(0)")),
        "fixed-negative": catalog_seed("c/x", catalog_entry("x", value="fixed(-24)")),
        "fixed-huge": catalog_seed("c/x", catalog_entry("x", value="fixed(99999999999999)")),
        "value-encoding-newline": catalog_seed("c/x", catalog_entry("x", value="cbor\nfake")),
        "database-catalog": catalog_seed("c/x", catalog_entry("x", database="_catalog")),
        "database-other": catalog_seed("c/x", catalog_entry("x", database="c/dailyRecords")),
        "index-database-other": catalog_seed("c/x", dict(catalog_entry("x"), indexes=[
            {"name": "i", "keyEncoding": "int64", "database": "c/x"}])),
        "index-twice": catalog_seed("c/x", catalog_entry("x", indexes=[("i", "int64"), ("i", "int64")])),
        "name-dotdot": catalog_seed("c/../x", catalog_entry("../x")),
        "name-long": catalog_seed("c/" + "n" * 60, catalog_entry("n" * 300)),
        "schema-zero": catalog_seed("c/x", catalog_entry("x", schema=0)),
        "schema-huge": catalog_seed("c/x", catalog_entry("x", schema=2**63 - 1)),
        "defaults-with-index": catalog_seed("d/s", catalog_entry("s", "defaults", "string", indexes=[("i", "int64")])),
        "derived-from-self": catalog_seed("c/x", catalog_entry("x", derived_from="x")),
        "huge-indexes": catalog_seed("c/x", catalog_entry("x", indexes=[(f"i{i}", "int64") for i in range(200)])),
        "empty": b"",
    }


def history_entry(token=1, txn=5, author="app", ts=1795000000.5, kind="collection", name="events", key=b"\x80\x00",
                  op="put"):
    d = {"token": token, "transactionID": txn, "timestamp": Tag(1, ts), "kind": kind, "name": name,
         "key": list(key), "operation": op}
    if author is not None:
        d["author"] = author
    return d


def history_seeds():
    e = lambda **kw: b"\x00" + cbor(history_entry(**kw))  # noqa: E731
    c = lambda v: b"\x01" + (v if isinstance(v, bytes) else cbor(v))  # noqa: E731
    n = lambda v: b"\x02" + (v if isinstance(v, bytes) else cbor(v))  # noqa: E731
    return {
        "entry-valid": e(),
        "entry-defaults": e(kind="defaults", name="standard", key=b"theme", op="delete", author=None),
        "entry-max-token": e(token=2**64 - 1, txn=2**63 - 1),
        "entry-negative-txn": e(txn=-5),
        "entry-unknown-kind": e(kind="table"),
        "entry-bad-name": e(name="../x"),
        "entry-nan-time": e(ts=float("nan")),
        "entry-inf-time": e(ts=float("inf")),
        "entry-bad-op": e(op="truncate"),
        "entry-negative-token": e(token=-1),
        "entry-token-too-big": b"\x00" + cbor(dict(history_entry(), token=Raw(b"\xc2\x49" + b"\x01" + b"\x00" * 8))),
        "entry-lying-length": b"\x00\xa8\x65token\x01\x63key\x5b\xff\xff\xff\xff\xff\xff\xff\xff",
        "entry-huge-key": e(key=bytes(range(256)) * 8),
        "entry-not-cbor": b"\x00garbage",
        "consumer-valid": c({"token": 3, "updatedAt": Tag(1, 1795000000.0), "author": "widget"}),
        "consumer-negative": c({"token": -1, "updatedAt": Tag(1, 0.0)}),
        "consumer-huge": c({"token": 2**64 - 1, "updatedAt": Tag(1, 0.0)}),
        "consumer-overflow": c({"token": Raw(b"\xc2\x49\x01" + b"\x00" * 8), "updatedAt": Tag(1, 0.0)}),
        "consumer-wrong-shape": c([1, 2, 3]),
        "state-valid": n(42),
        "state-max": n(2**64 - 1),
        "state-negative": n(-1),
        "state-text": n("lastToken"),
        "state-float": n(1.5),
        "empty": b"",
    }


def feed_file(generation=1, payload=None, version=1, micros=1795000000123456, length=None, magic=b"KVFEED",
              checksum=None):
    payload = cbor({"total": 3.8, "streak": 12}) if payload is None else payload
    header = magic + struct.pack(">H", version) + struct.pack(">Q", generation) \
        + struct.pack(">Q", len(payload) if length is None else length) + struct.pack(">q", micros)
    digest = hashlib.sha256(header + payload).digest() if checksum is None else checksum
    return header + digest + payload


def feed_seeds():
    good = feed_file()
    return {
        "valid": good,
        "valid-empty-payload": feed_file(payload=b""),
        "valid-max-generation": feed_file(generation=2**64 - 1),
        "valid-min-time": feed_file(micros=-2**63),
        "valid-max-time": feed_file(micros=2**63 - 1),
        "valid-garbage-payload": feed_file(payload=b"\xff\xff not cbor"),
        "bad-magic": feed_file(magic=b"KVFEEE"),
        "version-0": feed_file(version=0),
        "version-future": feed_file(version=65535),
        "length-lies-short": feed_file(length=1),
        "length-lies-huge": feed_file(length=2**64 - 1),
        "checksum-wrong": feed_file(checksum=b"\x00" * 32),
        "flipped-payload": good[:-1] + bytes([good[-1] ^ 1]),
        "truncated-header": good[:40],
        "only-magic": b"KVFEED",
        "empty": b"",
    }


def manifest_json(snapshots, last=None, version=1):
    import json
    entries = [{"createdAt": "2026-11-21T08:00:00Z", "file": f"snapshot-{g:06d}.mdb" if f is None else f,
                "generation": g, "sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
                "size": 1138688, "sourceTransactionID": 412} for g, f in snapshots]
    last = max([g for g, _ in snapshots] + [0]) if last is None else last
    return json.dumps({"formatVersion": version, "lastGeneration": last, "snapshots": entries},
                      indent=2, sort_keys=True).encode() + b"\n"


def manifest_seeds():
    valid = manifest_json([(6, None), (7, None)])
    return {
        "valid": valid,
        "valid-empty": manifest_json([]),
        "valid-pruned": manifest_json([(7, None)], last=9),
        "valid-max-generation": manifest_json([(999999999999, None)]),
        "dotdot-path": manifest_json([(1, "../../Store/data.mdb")]),
        "absolute-path": manifest_json([(1, "/etc/passwd")]),
        "slash-name": manifest_json([(1, "feeds/snapshot-000001.mdb")]),
        "generation-huge": manifest_json([(10**15, None)]),
        "generation-int-overflow": valid.replace(b'"generation": 7', b'"generation": 99999999999999999999999'),
        "generation-zero": manifest_json([(0, None)]),
        "generation-negative": manifest_json([(-3, None)]),
        "generations-decrease": manifest_json([(7, None), (6, None)]),
        "last-below": manifest_json([(7, None)], last=3),
        "last-negative": manifest_json([], last=-1),
        "version-0": manifest_json([], version=0),
        "version-future": manifest_json([], version=99),
        "size-negative": valid.replace(b"1138688", b"-1", 1),
        "sha-upper": valid.replace(b"9f86d0", b"9F86D0", 1),
        "sha-short": valid.replace(b"9f86d0", b"", 1),
        "date-garbage": valid.replace(b"2026-11-21T08:00:00Z", b"yesterday", 1),
        "deep-nesting": b'{"formatVersion":1,"snapshots":' + b"[" * 5000 + b"]" * 5000 + b"}",
        "not-json": b"\x00\xff garbage",
        "truncated": valid[: len(valid) // 2],
        "empty": b"",
    }


# --- the sync gateway (fuzz/GatewayProperties): the adversarial suite's cases, by parser ---


def leb(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def zigzag(n):
    return leb((n << 1) ^ (n >> 63) & 0xFFFFFFFFFFFFFFFF if n < 0 else n << 1)


def wtext(t):
    b = t.encode() if isinstance(t, str) else t
    return leb(len(b)) + b


def push_body(changes, device="", skew=60000):
    out = wtext(device) + zigzag(skew) + leb(len(changes))
    for kind, name, key, value, clock, base, token in changes:
        out += wtext(kind) + wtext(name) + wtext(key) + (b"\x00" if value is None else b"\x01" + wtext(value))
        out += leb(clock) + zigzag(base) + leb(token)
    return out


def b64url(b):
    import base64
    return base64.urlsafe_b64encode(b).rstrip(b"=")


def jwt(header, claims, signature=b"sig"):
    return b64url(header.encode()) + b"." + b64url(claims.encode()) + b"." + b64url(signature)


def gateway_seeds():
    now = 1800000000
    change = ("collection", "notes", "k", b"\x61v", 1 << 16, 0, 1)
    valid = push_body([change])
    prefix = wtext("") + zigzag(0) + leb(1) + wtext("collection") + wtext("notes")
    seeds = {
        "push-valid": b"\x00" + valid,
        "push-empty": b"\x00" + push_body([]),
        "push-two": b"\x00" + push_body([change, ("collection", "notes", "k2", None, 1 << 17, 3, 2)]),
        "push-key-2-63": b"\x00" + prefix + leb(1 << 63) + b"k",
        "push-key-2-64-1": b"\x00" + prefix + leb((1 << 64) - 1) + b"k",
        "push-over-64-bits": b"\x00" + prefix + b"\xff" * 9 + b"\x7f",
        "push-count-2-63": b"\x00" + wtext("") + zigzag(0) + leb(1 << 63),
        "push-count-over-body": b"\x00" + wtext("") + zigzag(0) + leb(1000) + b"\x00",
        "push-trailing": b"\x00" + valid + b"\x00",
        "push-not-utf8": b"\x00" + wtext("") + zigzag(0) + leb(1) + b"\x02\xc3\x28",
        "push-nul-kind": b"\x00" + push_body([("collection\x00", "notes", "k", b"v", 1, 0, 1)]),
        "push-nul-device": b"\x00" + push_body([change], device="d\x00"),
        "push-clock-2-63": b"\x00" + push_body([("collection", "notes", "k", b"v", 1 << 63, 0, 1)]),
        "push-token-2-64-1": b"\x00" + push_body([("collection", "notes", "k", b"v", 1, 0, (1 << 64) - 1)]),
        "push-lifted-bound": b"\x00" + push_body([change], skew=(1 << 63) - 1),
        "push-impersonation": b"\x00" + push_body([change], device="alice"),
    }
    for n, target in enumerate(["GET /v1/hello", "POST /v1/push", "GET /v1/changes?after=0&limit=100", "GET /v1/changes?after=-1",
                                "GET /v1/changes?after=0&after=3", "GET /v1/changes?after=0&limit=100000", "GET /v2/hello",
                                "GET /v1/state?group=x", "GET /v1/changes?after=%30", "GET /v1/live", "DELETE /v1/push",
                                "GET /../etc/passwd", "GET /v1/changes?after=9223372036854775808", "GET /v1/changes?after=+1",
                                "GET /v99999999999999999999/hello"]):
        seeds[f"target-{n}"] = b"\x01" + target.encode()
    token = "kvs1_" + "A" * 43
    heads = [
        f"POST /v1/push\nauthorization: Bearer {token}\nkvsync-group: group.com.example.app\ncontent-length: 10",
        f"POST /v1/push\nauthorization: Bearer {token}\nkvsync-group: group.com.example.app\ncontent-length: 4\ntransfer-encoding: chunked",
        f"POST /v1/push\nauthorization: Bearer {token}\nkvsync-group: group.com.example.app\ncontent-length: 0\ncontent-length: 10",
        f"POST /v1/push\nauthorization: Bearer {token}\nkvsync-group: group.com.example.app\ncontent-length: 33554433",
        f"POST /v1/push\nauthorization: Bearer {token}\nkvsync-group: group.com.example.app",
        f"GET /v1/hello\nauthorization: Bearer {token}\nkvsync-group: group.com.example.app\ncontent-length: 5",
        f"GET /v1/hello\nauthorization: Basic a2V5OnZhbHVl\nkvsync-group: group.com.example.app",
        f"GET /v1/hello\nauthorization: Bearer {token}\nauthorization: Bearer {token}\nkvsync-group: group.com.example.app",
        f"GET /v1/hello\nauthorization: Bearer {token}\nkvsync-group: ../../etc",
        f"GET /v1/hello\nauthorization: Bearer {token}",
        f"GET /v1/hello\nauthorization: Bearer {token}\nkvsync-group: group.com.example.app\ncontent-length: +5",
        "GET /v1/hello\nauthorization: Bearer " + jwt('{"alg":"HS256"}', '{"group":"g"}').decode() + "\nkvsync-group: group.com.example.app",
        # The install id (issue 46): a secret's form, accepted; one character short; sent twice.
        f"POST /v1/push\nauthorization: Bearer {token}\nkvsync-group: group.com.example.app\nkvsync-install: {'i' * 43}\ncontent-length: 10",
        f"GET /v1/hello\nauthorization: Bearer {token}\nkvsync-group: group.com.example.app\nkvsync-install: {'i' * 42}",
        f"GET /v1/hello\nauthorization: Bearer {token}\nkvsync-group: group.com.example.app\nkvsync-install: {'i' * 43}\nkvsync-install: {'j' * 43}",
    ]
    for n, text in enumerate(heads):
        seeds[f"head-{n}"] = b"\x02" + text.encode()
    # The blob endpoints (issue 49): BlobAttacks' cases, by parser.
    blob = "0f" * 32
    for n, target in enumerate([f"HEAD /v1/blobs/{blob}", f"PUT /v1/blobs/{blob}", f"GET /v1/blobs/{blob}",
                                f"GET /v1/blobs/{blob.upper()}", f"GET /v1/blobs/{blob[:-2]}", f"GET /v1/blobs/{blob}0f",
                                f"POST /v1/blobs/{blob}", "GET /v1/blobs", f"GET /v1/blobs/{blob}/x", f"GET /v1/blobs/{blob}?x=1"]):
        seeds[f"blob-target-{n}"] = b"\x01" + target.encode()
    auth = f"authorization: Bearer {token}\nkvsync-group: group.com.example.app"
    blob_heads = [
        f"PUT /v1/blobs/{blob}\n{auth}\ncontent-length: 10\nupload-offset: 0\nupload-length: 20",
        f"GET /v1/blobs/{blob}\n{auth}\nrange: bytes=0-9",
        f"GET /v1/blobs/{blob}\n{auth}\nrange: bytes=-5",
        f"HEAD /v1/blobs/{blob}\n{auth}",
        f"PUT /v1/blobs/{blob}\n{auth}\ncontent-length: 1\nupload-offset: 0\nupload-length: 9223372036854775808",
        f"PUT /v1/blobs/{blob}\n{auth}\ncontent-length: 1048577\nupload-offset: 0\nupload-length: 2000000",
        f"PUT /v1/blobs/{blob}\n{auth}\ncontent-length: 1\nupload-offset: -1\nupload-length: 20",
        f"PUT /v1/blobs/{blob}\n{auth}\ncontent-length: 5\nupload-offset: 18\nupload-length: 20",
        f"GET /v1/blobs/{blob}\n{auth}\nrange: bytes=0-1,5-6",
        f"GET /v1/blobs/{blob}\n{auth}\nrange: bytes=9-3",
        f"PUT /v1/blobs/{blob}\n{auth}\nupload-offset: 0\nupload-length: 20",
        f"GET /v1/blobs/{blob}\n{auth}\nrange: bytes=99999999999999999999-",
    ]
    for n, text in enumerate(blob_heads):
        seeds[f"blob-head-{n}"] = b"\x02" + text.encode()
    exp = now + 3600
    good = f'"group":"group.com.example.app","device":"tablet","aud":"kvsync","exp":{exp}'
    jwts = {
        "jwt-valid": jwt('{"alg":"HS256","typ":"JWT"}', "{" + good + "}"),
        "jwt-none": jwt('{"alg":"none"}', "{" + good + "}", b""),
        "jwt-crit": jwt('{"alg":"HS256","crit":["exp"]}', "{" + good + "}"),
        "jwt-two-alg": jwt('{"alg":"none","alg":"HS256"}', "{" + good + "}"),
        "jwt-two-groups": jwt('{"alg":"HS256"}', '{"group":"group.com.example.other",' + good + "}"),
        "jwt-no-exp": jwt('{"alg":"HS256"}', '{"group":"group.com.example.app","aud":"kvsync"}'),
        "jwt-long-lived": jwt('{"alg":"HS256"}', '{"group":"g","aud":"kvsync","exp":%d}' % (now + 172800)),
        "jwt-iat-old": jwt('{"alg":"HS256"}', '{"group":"g","aud":"kvsync","iat":%d,"exp":%d}' % (now - 172800, exp)),
        "jwt-aud-array": jwt('{"alg":"ES256"}', '{"group":"g","aud":["x","kvsync"],"exp":%d}' % exp),
        "jwt-aud-other": jwt('{"alg":"ES256"}', '{"group":"g","aud":"x","exp":%d}' % exp),
        "jwt-reserved-device": jwt('{"alg":"HS256"}', '{"group":"g","device":"credential-7","aud":"kvsync","exp":%d}' % exp),
        "jwt-install-device": jwt('{"alg":"HS256"}', '{"group":"g","sub":"bob#0123456789abcdef01234567","aud":"kvsync","exp":%d}' % exp),
        "jwt-nested": jwt('{"alg":"HS256","x":' + "[" * 40 + "]" * 40 + "}", "{" + good + "}"),
        "jwt-two-parts": b"e30.e30",
        "jwt-bad-base64": b"e30.e3*.e30",
    }
    for name, token_bytes in jwts.items():
        seeds[name] = b"\x03" + token_bytes
    for n, claims in enumerate(["{" + good + "}", "{" + good + ',"read_only":true}', '{"group":1,"exp":1}',
                                "{" + good + "} trailing", '{"group":"g","exp":"1800003600","aud":"kvsync"}',
                                "{" + good + ',"sub":"\u0000"}', "[]", '{"exp":1e999}']):
        seeds[f"claims-{n}"] = b"\x04" + claims.encode()
    page = zigzag(0) + zigzag(5) + b"\x00" + leb(1) + zigzag(5) + wtext("d") + wtext("collection") + wtext("notes") + wtext("k") \
        + b"\x01" + wtext(b"v") + leb(1 << 16) + leb(1) + b"\x00" + b"\x00"
    seeds["answer-page"] = b"\x05" + page
    seeds["answer-page-count-lies"] = b"\x05" + zigzag(0) + zigzag(5) + b"\x00" + leb(1 << 62)
    seeds["answer-push-outcomes"] = b"\x06" + leb(0) + leb(2) + leb(0) + zigzag(7) + leb(1) + zigzag(8) + b"\x00" + leb(1) + wtext("d") + b"\x00"
    seeds["answer-push-clock-ahead"] = b"\x06" + leb(1) + zigzag(86400000)
    seeds["answer-state"] = b"\x07" + zigzag(5) + leb(0)
    return seeds


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else ".build-fuzz-libfuzzer/seeds"
    for target, seeds in (("cbor", cbor_seeds()), ("keys", key_seeds()), ("paths", path_seeds()), ("dump", dump_seeds()),
                          ("catalog", catalog_seeds()), ("history", history_seeds()), ("feed", feed_seeds()),
                          ("manifest", manifest_seeds()), ("gateway", gateway_seeds())):
        folder = os.path.join(out, target)
        os.makedirs(folder, exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
        print(f"{folder}: {len(seeds)} seeds")


if __name__ == "__main__":
    main()
