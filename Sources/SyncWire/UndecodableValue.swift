import KVStore

/// Values that no device can decode, refused at the push so that they never reach a device (issue
/// 47: a member pushed a 70-deep CBOR array to a key another device wrote; every device quarantined
/// it, and the key's writes waited behind it for good). Every device reads values with
/// ``KVStore/CBORLimits/default`` (64 levels of nesting): a CBOR collection's codec, and every
/// defaults suite, whose values are CBOR.
///
/// What is refused, and nothing else:
/// - a defaults value that is not one CBOR data item a device's decoder reads (malformed, truncated,
///   nested deeper than 64 levels, invalid UTF-8, a duplicate map key, bytes after the item);
/// - a collection value that is one well-formed CBOR data item nested deeper than 64 levels. Other
///   bytes pass: a collection of raw bytes or fixed layouts stores any bytes, and the server knows no
///   collection's encoding. (The one value a raw-bytes collection could hold that is refused is
///   exactly such a deep CBOR item.)
///
/// The sync gateway checks every push with it, and a replicator checks what it is about to send.
package enum UndecodableValue {
    /// The nesting every device's decoder reads.
    package static let maxDepth = CBORLimits.default.maxDepth

    /// Why no device can decode `value` of a change of `kind` (`collection` or `defaults`), in words
    /// that follow "its value is"; `nil` when a device can (or a delete).
    package static func problem(kind: String, value: [UInt8]?) -> String? {
        guard let value else { return nil }
        if kind == "defaults" {
            do {
                _ = try CBORValue.decode(value, limits: CBORLimits(maxInputSize: Int.max, maxDepth: maxDepth))
                return nil
            } catch {
                return "not CBOR that a device reads (\(error))"
            }
        }
        // Nesting past the limit takes at least one byte a level.
        guard value.count > maxDepth + 1 else { return nil }
        do {
            try CBORValue.validate(value, limits: CBORLimits(maxInputSize: Int.max, maxDepth: maxDepth))
            return nil
        } catch let error as CBORError where error.kind == .limitExceeded {
            // Too deep: refused if it is otherwise one well-formed item (checked without recursion,
            // whatever its depth), not bytes of another encoding that happen to start so.
            guard (try? CBORValue.validate(value, limits: CBORLimits(maxInputSize: Int.max, maxDepth: value.count))) != nil else {
                return nil
            }
            return "CBOR nested deeper than \(maxDepth) levels, which no device's decoder reads"
        } catch {
            return nil
        }
    }
}
