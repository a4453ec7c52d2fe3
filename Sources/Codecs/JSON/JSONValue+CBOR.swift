#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif

extension JSONValue {
    /// A CBOR value as JSON, converted as RFC 8949 §6.1 says, for people and scripts:
    ///
    /// - integers stay exact numbers, and floats numbers (`3.0`); a non-finite float is `null`;
    /// - byte strings are base64url without padding, or inside tag 22 or 23 base64 or base16, as those
    ///   tags ask (tag 21 is base64url);
    /// - a bignum (tags 2 and 3) is the base64url of its magnitude, with `~` before a negative one;
    /// - simple values other than `true`, `false` and `null` are `null`, as `undefined` is;
    /// - dates (tag 1 and ``CBORTag/referenceDate``) are ISO 8601 strings, UUIDs (tag 37) strings, and
    ///   decimal fractions (tag 4) exact numbers; other tags are their content;
    /// - a map keeps its stored order; a key that is not text is named by its JSON text (`1`,
    ///   `[1,2]`), so two keys may be written alike: write it with a ``JSONWriter`` whose
    ///   ``JSONWriter/requiresUniqueKeys`` is off, as ``jsonText(_:)`` does.
    ///
    /// ```swift
    /// JSONValue.jsonText(.map([(.text("n"), .unsigned(1)), (.text("b"), .bytes([0xFF]))]))   // {"n":1,"b":"_w"}
    /// ```
    public init(cbor: CBORValue) {
        self = Self.converting(cbor, bytesAs: .base64url)
    }

    /// The compact JSON text of a CBOR value (``init(cbor:)``), written by ``JSONWriter/cborCompact``.
    public static func jsonText(_ cbor: CBORValue) -> String {
        // A value converted from CBOR holds no NaN and may repeat keys, which this writer allows:
        // rendering cannot fail.
        (try? JSONWriter.cborCompact.render(JSONValue(cbor: cbor))) ?? "null"
    }

    /// How byte strings are written: RFC 8949's expected conversions (tags 21–23).
    private enum BytesText { case base64url, base64, base16 }

    private static func converting(_ value: CBORValue, bytesAs encoding: BytesText) -> JSONValue {
        switch value {
        case .unsigned(let n): return .number(Decimal(n))
        case .negative(let n): return .number(-1 - Decimal(n))
        case .float(let d): return d.isFinite ? .float(d) : .null
        case .text(let s): return .string(s)
        case .bytes(let b): return .string(text(b, encoding))
        case .bool(let b): return .bool(b)
        case .null, .undefined, .simple: return .null
        case .array(let items): return .array(items.map { converting($0, bytesAs: encoding) })
        case .map(let entries):
            return .object(entries.map { entry in
                let key: String = switch entry.key {
                case .text(let s): s
                default: jsonText(entry.key)
                }
                return Member(key, converting(entry.value, bytesAs: encoding))
            })
        case .tagged(let tag, let content):
            switch (tag, content) {
            case (CBORTag.positiveBignum, .bytes(let magnitude)): return .string(Base64.url(magnitude))
            case (CBORTag.negativeBignum, .bytes(let magnitude)): return .string("~" + Base64.url(magnitude))
            case (21, _): return converting(content, bytesAs: .base64url)
            case (22, _): return converting(content, bytesAs: .base64)
            case (23, _): return converting(content, bytesAs: .base16)
            case (CBORTag.epochDate, _), (CBORTag.referenceDate, _), (CBORTag.uuid, _), (CBORTag.decimalFraction, _):
                return (try? special(value)) ?? converting(content, bytesAs: encoding)
            default:
                return converting(content, bytesAs: encoding)
            }
        }
    }

    private static func text(_ bytes: [UInt8], _ encoding: BytesText) -> String {
        switch encoding {
        case .base64url: Base64.url(bytes)
        case .base64: Base64.standard(bytes)
        case .base16: Hex.encode(bytes).uppercased()
        }
    }

    /// A date, UUID or decimal fraction as the value it stands for; throws when the content is not
    /// one (the tag's content is then shown as it is).
    private static func special(_ value: CBORValue) throws -> JSONValue {
        guard case .tagged(let tag, _) = value else { return .null }
        let bytes = value.encoded()
        switch tag {
        case CBORTag.uuid: return .string(try CBORDecoder().decode(UUID.self, from: bytes).uuidString)
        case CBORTag.decimalFraction:
            let decimal = try CBORDecoder().decode(Decimal.self, from: bytes)
            return decimal.isNaN ? .null : .number(decimal)
        default:
            let date = try CBORDecoder().decode(Date.self, from: bytes)
            return .string(date.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true)))
        }
    }
}

extension JSONWriter {
    /// The compact layout for CBOR shown as JSON: one line, and map keys that convert alike are both
    /// written (``JSONValue/init(cbor:)``).
    public static let cborCompact = JSONWriter(layout: .compact, trailingNewline: false, requiresUniqueKeys: false)
}
