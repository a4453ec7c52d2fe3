/// Limits that decoding enforces, so that corrupt or hostile bytes give an error instead of
/// exhausting memory or the stack.
///
/// ```swift
/// var limits = CBORLimits.default
/// limits.maxInputSize = 1 << 20            // refuse values over 1 MiB
/// let note = try CBORDecoder(limits: limits).decode(Note.self, from: bytes)
/// ```
public struct CBORLimits: Sendable, Hashable {
    /// The largest input, in bytes, that decoding accepts. Larger input fails with a
    /// ``CBORError`` of kind ``CBORError/Kind/limitExceeded`` before any byte is parsed.
    /// The default is 16 MiB.
    public var maxInputSize: Int

    /// The deepest nesting of arrays, maps and tags that decoding accepts. The default is 64:
    /// 64 nested arrays decode, 65 fail with ``CBORError/Kind/limitExceeded``.
    ///
    /// Decoding into Swift types recurses once per level, so keep this in the low thousands at most.
    public var maxDepth: Int

    /// Creates limits.
    ///
    /// - Parameters:
    ///   - maxInputSize: The largest input in bytes (default 16 MiB).
    ///   - maxDepth: The deepest nesting of arrays, maps and tags (default 64).
    public init(maxInputSize: Int = 16 * 1024 * 1024, maxDepth: Int = 64) {
        self.maxInputSize = maxInputSize
        self.maxDepth = maxDepth
    }

    /// 16 MiB of input and 64 levels of nesting.
    public static let `default` = CBORLimits()
}
