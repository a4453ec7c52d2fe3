import ArgumentParser
import KVStore
import SyncKit
#if PostgreSQL
import SyncKitPostgres
#endif

extension CLIError {
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
            // The error's class is replication's one table; a class that a request reports exits as
            // that report does (`kvtool sync request`).
            switch error.classification {
            case .invalidInput, .invalidCredential: self.init(.badInput, error.description)
            case .notFound: self.init(.notFound, error.description)
            case .credentialRefused, .clockSkew, .unreachable, .rateLimited, .failure:
                self.init(Kind(error.classification.failureReason), error.description)
            }
        #endif
        case let error as SyncError:
            switch error {
            case .unknownConsumer: self.init(.notFound, error.description)
            case .invalidConsumerName, .invalidNotificationName: self.init(.usage, error.description)
            case .tokenFromTheFuture: self.init(.notFound, error.description)
            case .corruptHistory, .ownershipConflict: self.init(.failure, error.description)
            case .invalidAgentRegistration: self.init(.badInput, error.description)
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
}

extension CLIError.Kind {
    /// What a sync round that failed for `reason` exits with (`kvtool sync request`, and a replication
    /// error of that class).
    init(_ reason: SyncFailure.Reason) {
        switch reason {
        case .clockSkew: self = .clockSkew
        case .credential: self = .credential
        case .quarantine, .unreachable, .rateLimited, .other: self = .failure
        }
    }
}

#if PostgreSQL
extension CLIError {
    /// A secret file that cannot be read (1), that others can read (65), or that is not what it
    /// should hold (65).
    init(refusal: SecretFile.Refusal) {
        self.init(refusal.kind == .notFound ? .notFound : .badInput, refusal.description)
    }
}
#endif
