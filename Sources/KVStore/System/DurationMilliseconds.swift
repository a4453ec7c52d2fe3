package extension Duration {
    /// The whole milliseconds of this duration (rounded toward zero), as PostgreSQL settings, wire
    /// fields and messages take them.
    var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}

package extension Duration {
    /// This duration in seconds, as a command-line option takes it (`30.0`, `0.25`).
    var inSeconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
