#!/usr/bin/env python3
"""The Python side of CBORCodecTests' interop tests, using cbor2.

usage:
    cbor_interop.py decode FILE            check that FILE (written by Swift's CBOREncoder) holds the
                                           expected values with the expected Python types; print "ok"
    cbor_interop.py encode FILE            write the sample dict with cbor2's defaults
    cbor_interop.py encode-canonical FILE  the same with canonical=True (shortest floats, sorted keys)
    cbor_interop.py encode-timestamp FILE  the same with datetime_as_timestamp=True (tag 1, not tag 0)

Exit status: 0 on success, 1 when a check fails (the reason on stderr), 2 on bad usage,
3 when cbor2 is missing.
"""

import sys

try:
    import cbor2
except ImportError:
    print("install cbor2: pip install cbor2 (python3 cannot import cbor2)", file=sys.stderr)
    sys.exit(3)

import datetime
import decimal
import uuid

UTC = datetime.timezone.utc
SAMPLE_UUID = uuid.UUID("E621E1F8-C36C-495A-93FC-0C247A3E6E5F")
HUGE = decimal.Decimal("99999999999999999999999999999999999999")


def check_swift_output(path):
    """Checks the value that CBORCodecTests' InteropOut.sample encodes to."""
    with open(path, "rb") as f:
        value = cbor2.loads(f.read())
    failures = []

    def expect(key, expected_type, expected_value):
        if not isinstance(value, dict):
            failures.append(f"top level: expected dict, got {type(value).__name__}")
            return
        if key not in value:
            failures.append(f"{key}: missing")
            return
        actual = value[key]
        if type(actual) is not expected_type:
            failures.append(f"{key}: expected {expected_type.__name__}, got {type(actual).__name__} {actual!r}")
        elif actual != expected_value:
            failures.append(f"{key}: expected {expected_value!r}, got {actual!r}")

    expect("int", int, 42)
    expect("negative", int, -1234567890123)
    expect("int64Max", int, 2**63 - 1)
    expect("int64Min", int, -(2**63))
    expect("uint64Max", int, 2**64 - 1)
    expect("double", float, 3.25)
    expect("text", str, "こんにちは、世界 🌏")
    expect("flag", bool, True)
    expect("nothing", type(None), None)
    expect("data", bytes, b"\x00\x01\xfe\xff")
    expect("date", datetime.datetime, datetime.datetime.fromtimestamp(1700000000.25, tz=UTC))
    expect("price", decimal.Decimal, decimal.Decimal("1234.56"))
    expect("tiny", decimal.Decimal, decimal.Decimal("-0.000001"))
    expect("huge", decimal.Decimal, HUGE)
    expect("id", uuid.UUID, SAMPLE_UUID)
    expect("list", list, [[1, 2], [3]])
    expect("dict", dict, {"a": 1, "b": 2})
    expect("child", dict, {"name": "x", "tags": ["t"]})
    if isinstance(value, dict) and isinstance(value.get("date"), datetime.datetime) and value["date"].tzinfo is None:
        failures.append("date: expected a timezone-aware datetime")
    if isinstance(value, dict):
        expected_keys = ["int", "negative", "int64Max", "int64Min", "uint64Max", "double", "text", "flag",
                         "nothing", "data", "date", "price", "tiny", "huge", "id", "list", "dict", "child"]
        if list(value.keys()) != expected_keys:
            failures.append(f"keys: expected {expected_keys} in that order, got {list(value.keys())}")
    if failures:
        print("; ".join(failures), file=sys.stderr)
        sys.exit(1)
    print("ok")


def sample():
    """The value that CBORCodecTests' InteropIn decodes."""
    return {
        "int": 2**62 + 7,
        "negative": -(2**63),
        "ratio": 0.1,
        "half": 1.5,
        "text": "東京タワー",
        "flag": False,
        "missing": None,
        "blob": bytes([0, 1, 2, 254, 255]),
        "when": datetime.datetime(2024, 3, 1, 12, 30, 15, 250000,
                                  tzinfo=datetime.timezone(datetime.timedelta(hours=9))),
        "whenUTC": datetime.datetime(2001, 1, 1, tzinfo=UTC),
        "whenStamp": cbor2.CBORTag(1, 1709263815.25),
        "price": decimal.Decimal("1234.56"),
        "tiny": decimal.Decimal("-0.000001"),
        "huge": HUGE,
        "id": SAMPLE_UUID,
        "list": [[1, 2], [3]],
        "dict": {"a": 1, "b": 2},
        "intKeys": {1: "one", -2: "minus two"},
    }


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    mode, path = argv[1], argv[2]
    if mode == "decode":
        check_swift_output(path)
        return
    options = {
        "encode": {},
        "encode-canonical": {"canonical": True},
        "encode-timestamp": {"datetime_as_timestamp": True},
    }
    if mode not in options:
        print(f"unknown mode {mode!r}\n{__doc__}", file=sys.stderr)
        sys.exit(2)
    with open(path, "wb") as f:
        f.write(cbor2.dumps(sample(), **options[mode]))
    print("ok")


if __name__ == "__main__":
    main(sys.argv)
