import Foundation
import KVStore
#if PostgreSQL
import SyncKitPostgres
#endif

/// An error `kvtool` reports as one line on stderr, with the exit code of its class.
struct CLIError: Error, CustomStringConvertible {
    /// The documented exit codes.
    enum Kind: Int32 {
        case notFound = 1
        case usage = 64
        case badInput = 65
        case failure = 74
        /// The replication server refused this device's changes: its clock is too far ahead.
        case clockSkew = 75
        /// The sync gateway refused this device's credential (sysexits' EX_NOPERM).
        case credential = 77
    }

    let kind: Kind
    let message: String

    init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    var description: String { message }

    /// Classifies library errors; `nil` for errors swift-argument-parser reports itself.
    init?(mapping error: any Error) {
        switch error {
        case let error as KVStoreError:
            switch error {
            case .collectionNotFound, .fileNotFound:
                self.init(.notFound, error.description)
            case .invalidGroupIdentifier, .invalidPath, .invalidName, .invalidKey, .valueTooLarge,
                 .notAPropertyList, .encodingFailed, .catalogMismatch:
                self.init(.badInput, error.description)
            case .corruptValue, .schemaTooNew, .readOnly, .nestedWrite, .databaseOpenedInsideTransaction, .transactionEnded,
                 .observerRequired, .nestedTransaction, .collectionOpenedInsideTransaction, .conflictingOptions,
                 .mapLimitReached, .io, .unsafeFile, .mapSizeOverLimit, .truncatedStore:
                self.init(.failure, error.description)
            }
        #if PostgreSQL
        case let error as ReplicationError:
            switch error {
            case .invalidServerURL, .unsupportedTarget, .invalidCredential: self.init(.badInput, error.description)
            case .credentialRefused, .deviceInUse: self.init(.credential, error.description)
            case .rateLimited: self.init(.failure, error.description)
            case .malformedServerRow: self.init(.badInput, error.description)
            case .notDeclared: self.init(.notFound, error.description)
            case .server, .unreachable, .serverSchemaTooNew, .corruptState, .noServer: self.init(.failure, error.description)
            case .clockAhead: self.init(.clockSkew, error.description)
            }
        #endif
        case let error as LMDBError:
            self.init(.failure, "store error: \(error)")
        case let error as KeyDecodingError:
            self.init(.badInput, "bad key: \(error)")
        case let error as CBORError:
            self.init(.badInput, "bad value: \(error)")
        case is DecodingError, is EncodingError:
            self.init(.badInput, "bad value: \(error)")
        default:
            return nil
        }
    }

    func exit() -> Never {
        let line = "kvtool: error: " + message.replacingOccurrences(of: "\n", with: " ") + "\n"
        FileHandle.standardError.write(Data(line.utf8))
        Foundation.exit(kind.rawValue)
    }
}
