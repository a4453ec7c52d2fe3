#if PostgreSQL
import SyncKit

extension ReplicationError {
    /// What kind of failure an error is, for whoever must act on it: the one table of replication's
    /// errors (``classification``), which the replicator's recorded reason (``failureReason``) and
    /// kvtool's exit codes read. A new error is one case of ``ReplicationError`` and one line here: the
    /// switch does not compile until it is classified, and no reader of a class has a `default:`.
    package enum Classification: CaseIterable, Sendable {
        /// Something given to replicate with cannot be used (a URL, a target, a row or value).
        case invalidInput
        /// A credential, group or device name given to issue or present a token cannot be used.
        case invalidCredential
        /// The server refused this device's credential, or its device id.
        case credentialRefused
        /// What was named is not there (a target not declared, a quarantined change).
        case notFound
        /// The server refused this device's changes: its clock is too far ahead.
        case clockSkew
        /// Nothing answers at the server's address.
        case unreachable
        /// The gateway asks this device to wait.
        case rateLimited
        /// Anything else the server or the store answered.
        case failure

        /// How a request reports a round that failed so (``SyncKit/SyncFailure``).
        package var failureReason: SyncFailure.Reason {
            switch self {
            case .clockSkew: .clockSkew
            case .invalidCredential, .credentialRefused: .credential
            case .unreachable: .unreachable
            case .rateLimited: .rateLimited
            case .invalidInput, .notFound, .failure: .other
            }
        }
    }

    /// The one table.
    package var classification: Classification {
        switch self {
        case .invalidServerURL, .unsupportedTarget, .malformedServerRow, .undecodableValue: .invalidInput
        case .invalidCredential: .invalidCredential
        case .credentialRefused, .deviceInUse: .credentialRefused
        case .notDeclared, .notQuarantined, .notRejected: .notFound
        case .clockAhead: .clockSkew
        case .unreachable: .unreachable
        case .rateLimited: .rateLimited
        case .server, .serverSchemaTooNew, .corruptState, .noServer, .pushRefused, .ownedElsewhere: .failure
        }
    }
}
#endif
