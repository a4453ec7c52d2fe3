/// The CBOR tag numbers that ``CBOREncoder`` writes and ``CBORDecoder`` reads.
public enum CBORTag {
    /// Tag 1: a `Date` as seconds since 1970-01-01 UTC (an integer or a float).
    public static let epochDate: UInt64 = 1
    /// A private tag (first-come-first-served range): a `Date` as a float64 of seconds since
    /// 2001-01-01 UTC, Foundation's reference date, which is how `Date` stores its value.
    ///
    /// ``CBOREncoder`` uses it only for the `Date`s whose seconds since 1970 cannot be represented
    /// exactly by a float64 (converting to the 1970 base rounds away low bits), so that every `Date`
    /// round-trips exactly; all others are written with tag 1 (``epochDate``). Other CBOR readers
    /// see an unknown tag around a float (Python's `cbor2` gives a `CBORTag`).
    /// The number spells "KVS1" in ASCII (0x4B565331).
    public static let referenceDate: UInt64 = 1_262_698_545
    /// Tag 2: an unsigned bignum, a byte string holding a big-endian magnitude.
    public static let positiveBignum: UInt64 = 2
    /// Tag 3: a negative bignum, a byte string holding n for the value -1 - n.
    public static let negativeBignum: UInt64 = 3
    /// Tag 4: a decimal fraction, an array `[exponent, mantissa]` for mantissa × 10^exponent.
    public static let decimalFraction: UInt64 = 4
    /// Tag 32: a URI as a text string.
    public static let uri: UInt64 = 32
    /// Tag 37: a UUID as a byte string of 16 bytes.
    public static let uuid: UInt64 = 37
    /// Tag 0: a date as an RFC 3339 text string. Read (Python's `cbor2` writes it for `datetime`),
    /// never written.
    public static let dateString: UInt64 = 0
    /// Tag 55799: "self-described CBOR". Read and ignored wherever it appears.
    public static let selfDescribed: UInt64 = 55799
}
