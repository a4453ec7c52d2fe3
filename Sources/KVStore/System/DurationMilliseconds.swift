package extension Duration {
    /// The whole milliseconds of this duration (rounded toward zero), as PostgreSQL settings, wire
    /// fields and messages take them.
    var wholeMilliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }
}
