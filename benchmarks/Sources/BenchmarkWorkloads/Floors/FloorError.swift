/// What a floor decoder found instead of what it expected, and where.
struct FloorError: Error, CustomStringConvertible {
    let reason: StaticString
    let offset: Int

    var description: String { "\(reason) at byte \(offset)" }
}
