import Foundation
import KVStore
import SyncKit
#if PostgreSQL
import SyncKitPostgres
#endif

/// An error `kvtool` reports as one line on stderr, with the exit code of its class.
struct CLIError: Error, CustomStringConvertible {
    /// The documented exit codes, each with its one-line meaning: `kvtool help`, the README and the
    /// DocC pages list these (a test checks that they agree).
    enum Kind: Int32, CaseIterable {
        case notFound = 1
        case usage = 64
        case badInput = 65
        /// A store or I/O failure, and any error nothing classified.
        case failure = 74
        /// The replication server refused this device's changes: its clock is too far ahead.
        case clockSkew = 75
        /// The sync gateway refused this device's credential (sysexits' EX_NOPERM).
        case credential = 77

        var meaning: String {
            switch self {
            case .notFound: "not found"
            case .usage: "usage"
            case .badInput: "bad input data"
            case .failure: "store or I/O failure, or an error nothing classified"
            case .clockSkew: "the replication server refused this machine's changes: its clock is too far ahead"
            case .credential: "a gateway refused this device's credential (or the server its device id)"
            }
        }

        /// "0 success, 1 not found, 64 usage, …": the list `kvtool help` prints.
        static var summary: String {
            (["0 success"] + allCases.map { "\($0.rawValue) \($0.meaning)" }).joined(separator: "; ")
        }
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
            case .corruptValue, .schemaTooNew, .readOnly, .closed, .nestedWrite, .databaseOpenedInsideTransaction, .transactionEnded,
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
        case let error as SyncError:
            switch error {
            case .unknownConsumer: self.init(.notFound, error.description)
            case .invalidConsumerName, .invalidNotificationName: self.init(.usage, error.description)
            case .tokenFromTheFuture: self.init(.notFound, error.description)
            case .corruptHistory: self.init(.failure, error.description)
            }
        case let error as SnapshotError:
            switch error {
            case .generationNotFound, .noSnapshots: self.init(.notFound, error.description)
            case .invalidGeneration, .invalidKeepCount: self.init(.usage, error.description)
            case .corruptManifest, .unsupportedManifestVersion, .readBackMismatch: self.init(.failure, error.description)
            }
        case let error as WidgetFeedError:
            switch error {
            case .notPublished: self.init(.notFound, error.description)
            case .invalidName: self.init(.usage, error.description)
            case .payloadTooLarge, .payloadMismatch: self.init(.badInput, error.description)
            case .corrupt, .unsupportedVersion, .fileTooLarge: self.init(.failure, error.description)
            }
        case let error as ExportError:
            switch error {
            case .invalidFileName: self.init(.usage, error.description)
            case .notANumber, .duplicateKey, .dateOutOfRange: self.init(.badInput, error.description)
            }
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

    /// What an error a command's `run()` threw exits with: kvtool's own, a library error's class, or
    /// 74 for an error nothing classified (never 64, "usage"); `nil` for swift-argument-parser's own
    /// errors (`help`, a `ValidationError`), which keep its usage contract.
    init?(runError error: any Error) {
        if let error = error as? CLIError {
            self = error
        } else if let mapped = CLIError(mapping: error) {
            self = mapped
        } else if [.success, .validationFailure].contains(KVTool.exitCode(for: error)) {
            return nil
        } else {
            self.init(.failure, "\(error)")
        }
    }

    func exit() -> Never {
        let line = "kvtool: error: " + message.replacingOccurrences(of: "\n", with: " ") + "\n"
        FileHandle.standardError.write(Data(line.utf8))
        Foundation.exit(kind.rawValue)
    }
}
