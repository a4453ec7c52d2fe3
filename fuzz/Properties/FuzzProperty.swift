// The properties that the fuzz harnesses (fuzz/Targets/*.swift, built by scripts/fuzz.sh) check on
// every input libFuzzer makes up, and that FuzzCorpusReplayTests checks on every input kept in
// fuzz/corpus/. This folder is the single copy of each property: SwiftPM builds it as the
// `FuzzProperties` target (a dependency of KVStoreTests only), and scripts/fuzz.sh compiles the same
// files into the instrumented harnesses. Only KVStore's public API is used, so the properties test
// what callers (kvtool, other processes) can reach.

/// A property that does not hold for an input: a bug in KVStore (or in the property).
///
/// The harnesses turn it into a crash that libFuzzer records; the replay tests into a failed test.
/// A trap inside KVStore is a crash in both.
public struct PropertyViolation: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// What a property saw an input do, when every check held.
public enum FuzzOutcome: Hashable, Sendable, CustomStringConvertible {
    /// The input was accepted (decoded, rendered, validated) and every round trip held.
    case accepted
    /// The input was rejected with the typed error the API documents; `kind` names it.
    case rejected(String)

    public var description: String {
        switch self {
        case .accepted: "accepted"
        case .rejected(let kind): "rejected (\(kind))"
        }
    }
}

/// The fuzz targets by name, as the harnesses, the corpus folders and the replay tests know them.
public enum FuzzTarget: String, CaseIterable, Sendable {
    case cbor, keys, paths, catalog

    /// Checks the target's property on one input.
    ///
    /// - Returns: Whether the input was accepted or rejected (with every check holding).
    /// - Throws: ``PropertyViolation`` when a check fails.
    public func check(_ input: [UInt8]) throws(PropertyViolation) -> FuzzOutcome {
        switch self {
        case .cbor: try CBORProperty.check(input)
        case .keys: try KeyProperty.check(input)
        case .paths: try PathProperty.check(input)
        case .catalog: try CatalogProperty.check(input)
        }
    }
}

/// Fails with `message` unless `condition` holds.
@inline(__always)
func require(_ condition: @autoclosure () -> Bool, _ message: @autoclosure () -> String) throws(PropertyViolation) {
    if !condition() { throw PropertyViolation(message()) }
}

/// Lowercase hex, for messages.
func hex(_ bytes: some Sequence<UInt8>) -> String {
    var out = ""
    for byte in bytes {
        out += byte < 16 ? "0" : ""
        out += String(byte, radix: 16)
    }
    return out
}
