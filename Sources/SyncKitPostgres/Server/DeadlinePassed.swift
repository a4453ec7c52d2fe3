#if PostgreSQL
/// ``withDeadline(_:what:typedTimeout:onTimeout:abandonWhen:_:abandoned:)``'s deadline won: nothing
/// answered within it. A type, so that a caller that says "unreachable" in its own words recognizes it
/// without reading a message (the others get ``ReplicationError/server(_:)`` with this line).
package struct DeadlinePassed: Error, CustomStringConvertible {
    /// `no answer from WHAT within TIMEOUT`.
    package var description: String
}
#endif
